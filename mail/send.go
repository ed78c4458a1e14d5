package mail

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/schema"
)

// Draft is the body of a send or reply request, already checked against its schema.
// For a reply, nil To/Cc/Bcc mean "not given" (the reply rules choose them).
type Draft struct {
	To             []string          `json:"to"`
	Cc             []string          `json:"cc"`
	Bcc            []string          `json:"bcc"`
	Subject        string            `json:"subject"`
	Text           string            `json:"text"`
	HTML           string            `json:"html"`
	Labels         []string          `json:"labels"`
	Attachments    []DraftAttachment `json:"attachments"`
	IdempotencyKey string            `json:"idempotencyKey"`
	ReplyAll       bool              `json:"replyAll"`
}

// DraftAttachment is an attachment as the API takes it: base64 content.
type DraftAttachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Content     string `json:"content"`
}

// Send sends a new message from inbox, starting a new thread.
//
// Errors: those of db.CommitSend, invalid_argument.
func (s *Service) Send(ctx context.Context, inbox *db.Inbox, d Draft) (db.SendResult, error) {
	to, cc, bcc := lowerAll(d.To), lowerAll(d.Cc), lowerAll(d.Bcc)
	return s.commit(ctx, inbox, d, outgoingParts{to: to, cc: cc, bcc: bcc, subject: d.Subject, autoSubmitted: "auto-generated"},
		fingerprint("send", inbox.InboxID, d, to, cc, bcc, nil))
}

// Reply answers the message messageID of inbox in its thread, with the recipients,
// subject and references the reply rules give (API-NOTES section 10).
//
// Errors: not_found, message_quarantined, invalid_reply, and those of Send.
func (s *Service) Reply(ctx context.Context, inbox *db.Inbox, messageID string, d Draft) (db.SendResult, error) {
	orig, err := s.store.GetMessage(ctx, inbox.ID, messageID)
	if err != nil {
		return db.SendResult{}, err
	}
	if orig.Quarantined {
		return db.SendResult{}, db.Errorf(db.ECodeMessageQuarantined, "message %s is quarantined; a person must review it in the dashboard first", messageID)
	}
	plan, err := PlanReply(Original{
		MessageID: orig.MessageID, Sent: orig.Direction == db.Sent, From: orig.From, To: orig.To, Cc: orig.Cc,
		ReplyTo: orig.ReplyTo, Subject: orig.Subject, References: orig.References,
	}, []string{inbox.Address}, ReplyRequest{ReplyAll: d.ReplyAll, To: lowerAll(d.To), Cc: lowerAll(d.Cc), Bcc: lowerAll(d.Bcc)})
	if errors.Is(err, ErrNoRecipients) {
		return db.SendResult{}, db.Errorf(db.ECodeInvalidReply, "to: the reply has no recipient left after removing this inbox's own address")
	}
	if err != nil {
		return db.SendResult{}, err
	}
	// The request's own recipients passed this limit in schema; reply-all adds the
	// original's, so the reply's recipients are held to it again.
	if n := len(plan.To) + len(plan.Cc) + len(plan.Bcc); n > schema.MaxRecipients {
		return db.SendResult{}, db.Errorf(db.ECodeInvalidReply, "cc: the reply would have %d recipients, more than %d", n, schema.MaxRecipients)
	}
	parts := outgoingParts{
		to: plan.To, cc: plan.Cc, bcc: plan.Bcc, subject: plan.Subject, autoSubmitted: "auto-replied",
		inReplyTo: plan.InReplyTo, references: plan.References, threadID: orig.ThreadID,
	}
	return s.commit(ctx, inbox, d, parts, fingerprint("reply", inbox.InboxID, d, plan.To, plan.Cc, plan.Bcc,
		append([]string{orig.ThreadID}, plan.References...)))
}

type outgoingParts struct {
	to, cc, bcc   []string
	subject       string
	autoSubmitted string
	inReplyTo     string
	references    []string
	threadID      string
}

func (s *Service) commit(ctx context.Context, inbox *db.Inbox, d Draft, p outgoingParts, fp []byte) (db.SendResult, error) {
	now := s.store.Now()
	atts := make([]Attachment, len(d.Attachments))
	stored := make([]db.NewAttachment, len(d.Attachments))
	for i, a := range d.Attachments {
		content, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil { // the schema checked it; this guards against a caller that did not
			return db.SendResult{}, db.Errorf(db.ECodeInvalidArgument, "attachments[%d].content: not valid base64", i)
		}
		atts[i] = Attachment{Filename: a.Filename, ContentType: a.ContentType, Content: content}
		stored[i] = db.NewAttachment{Filename: a.Filename, ContentType: strings.ToLower(a.ContentType), Content: content}
	}
	_, domain, _ := strings.Cut(inbox.Address, "@")
	msgID := NewMessageID(domain)
	raw, err := Compose(Outgoing{
		From: inbox.Address, FromName: inbox.DisplayName, To: p.to, Cc: p.cc, Bcc: p.bcc, Subject: p.subject,
		Text: d.Text, HTML: d.HTML, MessageID: msgID, InReplyTo: p.inReplyTo, References: p.references,
		AutoSubmitted: p.autoSubmitted, Date: now, Attachments: atts,
	})
	if err != nil {
		return db.SendResult{}, db.Errorf(db.ECodeInvalidArgument, "message cannot be composed: %v", err)
	}
	text := d.Text
	if strings.TrimSpace(text) == "" && d.HTML != "" {
		text = HTMLToText(d.HTML)
	}
	recipients := dedupe(append(append(append([]string{}, p.to...), p.cc...), p.bcc...))
	stamp := db.Time{Time: now}.String()
	delivery := &db.Delivery{Version: 1, SentAt: stamp, UpdatedAt: stamp, Recipients: make([]db.RecipientDelivery, len(recipients))}
	for i, r := range recipients {
		delivery.Recipients[i] = db.RecipientDelivery{Recipient: r, Status: db.RecipientQueued, UpdatedAt: stamp}
	}
	res, err := db.CommitSend(ctx, s.store, db.SendRequest{
		AccountID:      inbox.AccountID,
		IdempotencyKey: d.IdempotencyKey,
		Fingerprint:    fp,
		Recipients:     recipients,
		RateLimit:      s.sendLimit,
		Message: db.NewMessage{
			InboxID: inbox.ID, MessageID: msgID, Direction: db.Sent, From: inbox.Address,
			To: p.to, Cc: p.cc, Bcc: p.bcc, ReplyTo: []string{}, Subject: p.subject, Text: text, HTML: d.HTML,
			Preview: Preview(text), Timestamp: now, InReplyTo: p.inReplyTo, References: p.references,
			ThreadID: p.threadID, Labels: db.InitialLabels(db.Sent, false, d.Labels), Attachments: stored,
			Delivery: delivery, Raw: raw,
		},
	})
	if err == nil && !res.Deduplicated {
		s.wake()
	}
	return res, err
}

// fingerprint identifies a request's contents for idempotency: every field after
// defaults, the inbox, and for a reply the thread and references it continues. A list
// given empty is the list left out, and labels are a set: a client retrying may
// serialize either way.
func fingerprint(op, inboxID string, d Draft, to, cc, bcc, context []string) []byte {
	var atts []DraftAttachment
	if len(d.Attachments) > 0 {
		atts = d.Attachments
	}
	labels := slices.Compact(slices.Sorted(slices.Values(d.Labels)))
	b, _ := json.Marshal(struct {
		Op, Inbox                    string
		To, Cc, Bcc, Labels, Context []string
		Subject, Text, HTML          string
		ReplyAll                     bool
		Attachments                  []DraftAttachment
	}{op, inboxID, orNil(to), orNil(cc), orNil(bcc), orNil(labels), orNil(context), d.Subject, d.Text, d.HTML, d.ReplyAll, atts})
	h := sha256.Sum256(b)
	return h[:]
}

func orNil(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func lowerAll(in []string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, a := range in {
		out[i] = strings.ToLower(strings.TrimSpace(a))
	}
	return out
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, a := range in {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
