package mail

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/protect"
)

// Mail injected by the test controls (extensions section 6): delivered to an inbox without
// SMTP, through the same steps as mail that arrives (parse, scan, thread, store, events,
// triage), with verdicts a test may choose instead of the scan's and the classifier's.

// Injected is a message to inject: its raw MIME, and the verdicts that replace the scan
// (Protection) and the classifier (Triage) for it; nil keeps the server's own.
type Injected struct {
	Raw        []byte
	Protection *db.Protection
	Triage     *db.Triage
}

// InjectFields is injected mail given by its fields instead of its MIME (ComposeInjected).
type InjectFields struct {
	From        string            `json:"from"`
	To          []string          `json:"to"`
	Cc          []string          `json:"cc"`
	ReplyTo     []string          `json:"replyTo"`
	Subject     string            `json:"subject"`
	Text        string            `json:"text"`
	HTML        string            `json:"html"`
	Headers     []Header          `json:"headers"`
	Attachments []DraftAttachment `json:"attachments"`
	InReplyTo   string            `json:"inReplyTo"`
	References  []string          `json:"references"`
	Protection  *db.Protection    `json:"protection"`
	Triage      *db.Triage        `json:"triage"`
}

// Header is one header field of injected mail.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ComposeInjected renders f as the MIME a mail client would have sent to inbox: To is the
// inbox unless f names recipients, and the Message-ID is new, on the sender's domain.
//
// Errors: invalid_argument (naming the field).
func ComposeInjected(inbox *db.Inbox, f InjectFields) (Injected, error) {
	atts := make([]Attachment, len(f.Attachments))
	for i, a := range f.Attachments {
		content, err := base64.StdEncoding.DecodeString(a.Content)
		if err != nil {
			return Injected{}, db.Errorf(db.ECodeInvalidArgument, "attachments[%d].content: not valid base64", i)
		}
		atts[i] = Attachment{Filename: a.Filename, ContentType: a.ContentType, Content: content}
	}
	if err := checkInjectFields(f); err != nil {
		return Injected{}, err
	}
	headers := map[string]string{}
	for _, h := range f.Headers {
		headers[h.Name] = h.Value
	}
	to := f.To
	if len(to) == 0 {
		to = []string{inbox.Address}
	}
	_, domain, _ := strings.Cut(f.From, "@")
	raw, err := Compose(Outgoing{From: f.From, To: to, Cc: f.Cc, ReplyTo: f.ReplyTo, Subject: f.Subject, Text: f.Text,
		HTML: f.HTML, MessageID: NewMessageID(domain), InReplyTo: f.InReplyTo, References: f.References,
		Attachments: atts, Headers: headers})
	if err != nil {
		return Injected{}, db.Errorf(db.ECodeInvalidArgument, "%s", strings.TrimPrefix(err.Error(), "compose: "))
	}
	return Injected{Raw: raw, Protection: f.Protection, Triage: f.Triage}, nil
}

// injectFieldOf names the field of InjectFields that writes a header field, by the
// header's lower-case name.
var injectFieldOf = map[string]string{"from": "from", "to": "to", "cc": "cc", "reply-to": "replyTo", "subject": "subject",
	"in-reply-to": "inReplyTo", "references": "references"}

// checkInjectFields refuses what Compose would refuse in f's threading ids and extra
// header fields, and a verdict the scan could not have given, naming the field as the
// schema's refusals do (the schema checks the rest).
func checkInjectFields(f InjectFields) error {
	if f.InReplyTo != "" && !validHeaderID(f.InReplyTo) {
		return db.Errorf(db.ECodeInvalidArgument, "inReplyTo: must be a Message-ID in angle brackets without spaces, such as <id@example.com>")
	}
	for i, r := range f.References {
		if !validHeaderID(r) {
			return db.Errorf(db.ECodeInvalidArgument, "references[%d]: must be a Message-ID in angle brackets without spaces, such as <id@example.com>", i)
		}
	}
	if f.Protection != nil {
		if bad := protect.Inconsistencies(f.Protection); len(bad) > 0 {
			return db.Errorf(db.ECodeInvalidArgument, "protection.%s: %s", bad[0].Field, bad[0].Reason)
		}
	}
	seen := map[string]bool{}
	for i, h := range f.Headers {
		lower := strings.ToLower(h.Name)
		switch {
		case injectFieldOf[lower] != "":
			return db.Errorf(db.ECodeInvalidArgument, "headers[%d].name: %s is written from the %s field", i, h.Name, injectFieldOf[lower])
		case composedFields[lower]:
			return db.Errorf(db.ECodeInvalidArgument, "headers[%d].name: %s is written by the server; inject raw MIME (message/rfc822) to choose it", i, h.Name)
		case seen[lower]:
			return db.Errorf(db.ECodeInvalidArgument, "headers[%d].name: %s is given twice", i, h.Name)
		}
		seen[lower] = true
	}
	return nil
}

// Inject delivers in to inbox as received mail and returns where it was stored; a message
// whose Message-ID the inbox holds already is not stored again (its ids are returned).
//
// Errors: invalid_argument (the MIME has no message), ErrScanUnavailable, storage errors.
func (s *Service) Inject(ctx context.Context, inbox *db.Inbox, in Injected) (db.Stored, error) {
	a, err := s.injectedArrival(ctx, in)
	if err != nil {
		return db.Stored{}, err
	}
	m := s.copies(ctx, a, []int64{inbox.ID}, s.store.Now(), "")[0]
	if t := in.Triage; t != nil && m.Triage != nil { // --triage off keeps it off
		// The chosen triage replaces the classifier: pending stays pending, as a fixture's.
		m.Triage, m.ChargeTriage, m.QueueTriage = t, false, false
	}
	stored, err := db.Deliver(ctx, s.store, []db.NewMessage{m})
	if err != nil {
		return db.Stored{}, err
	}
	return stored[0], nil
}

// injectedArrival parses in and scans it, or takes its chosen verdict instead of a scan.
// A server that does not scan (--protection off) keeps no verdict, chosen or not: its
// mail is never quarantined (extensions section 7).
func (s *Service) injectedArrival(ctx context.Context, in Injected) (*arrival, error) {
	if in.Protection == nil || s.protect == nil {
		a, err := s.arrive(ctx, in.Raw, Origin{})
		if err == ErrEmptyMessage {
			return nil, db.Errorf(db.ECodeInvalidArgument, "body: the MIME holds no message")
		}
		return a, err
	}
	p, err := Parse(in.Raw)
	if err != nil {
		return nil, db.Errorf(db.ECodeInvalidArgument, "body: the MIME holds no message")
	}
	return &arrival{parsed: p, raw: in.Raw, verdict: &protect.Verdict{Protection: *in.Protection}}, nil
}
