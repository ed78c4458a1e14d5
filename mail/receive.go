package mail

import (
	"context"
	"net"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/protect"
)

// ErrScanUnavailable: a configured scanner (spamd, clamd) could not give a verdict, so the
// message was not stored. It is temporary: the SMTP listener answers 451 and the sender
// retries; local delivery retries from the queue. Test with errors.Is.
var ErrScanUnavailable = protect.ErrUnavailable

// Origin is where received mail came from, for its protection verdict.
type Origin struct {
	RemoteIP net.IP // the connecting SMTP client; nil when unknown
	Helo     string // the HELO/EHLO name
	MailFrom string // the envelope sender; "" for the null sender
	Internal bool   // sent by an inbox of this server
}

// scan computes the protection verdict of a parsed message, or nil when this server does
// not scan (no Protect scanner). data is the message as the client sent it.
//
// Errors: ErrScanUnavailable.
func (s *Service) scan(ctx context.Context, p *Parsed, data []byte, o Origin) (*protect.Verdict, error) {
	if s.protect == nil {
		return nil, nil
	}
	files := make([]protect.File, len(p.Attachments))
	for i, a := range p.Attachments {
		files[i] = protect.File{Filename: a.Filename, ContentType: a.ContentType, Content: a.Content}
	}
	v, err := s.protect.Scan(ctx, protect.Input{Raw: data, RemoteIP: o.RemoteIP, Helo: o.Helo, MailFrom: o.MailFrom,
		Internal: o.Internal, Subject: p.Subject, Text: p.Text, HTML: p.HTML, Attachments: files})
	if err != nil {
		s.log.Warn("protect: no verdict, the message waits for a retry", "message", p.MessageID, "err", err)
		return nil, err
	}
	if v.Quarantined() {
		s.log.Info("protect: quarantined", "message", p.MessageID, "verdict", v.Describe())
	}
	return v, nil
}

// arrival is a message on its way into inboxes of this server, after the steps every
// received message takes whichever way it came (SMTP, the test controls, a send to a local
// address): parsed once and given its protection verdict.
type arrival struct {
	parsed  *Parsed
	raw     []byte
	verdict *protect.Verdict
}

// arrive parses data and scans it; o says where it came from.
//
// Errors: ErrEmptyMessage, ErrScanUnavailable.
func (s *Service) arrive(ctx context.Context, data []byte, o Origin) (*arrival, error) {
	p, err := Parse(data)
	if err != nil {
		return nil, ErrEmptyMessage
	}
	v, err := s.scan(ctx, p, data, o)
	if err != nil {
		return nil, err
	}
	return &arrival{parsed: p, raw: data, verdict: v}, nil
}

// copies returns the messages to store for a, one per inbox (an inbox named twice gets one
// copy), received at now, with trace prepended to each stored raw copy.
func (s *Service) copies(ctx context.Context, a *arrival, inboxes []int64, now time.Time, trace string) []db.NewMessage {
	seen := map[int64]bool{}
	msgs := make([]db.NewMessage, 0, len(inboxes))
	for _, id := range inboxes {
		if seen[id] {
			continue
		}
		seen[id] = true
		m := s.received(a.parsed, a.raw, id, now, a.verdict, s.triageSignals(ctx, a.parsed, id))
		m.Trace = trace
		msgs = append(msgs, m)
	}
	return msgs
}

// applyVerdict puts a verdict on a message to store. A quarantined message carries only
// the quarantined label, joins no thread, and keeps its triage pending until a person
// releases it (db.InitialLabels, db.ReleaseMessage).
func applyVerdict(m *db.NewMessage, v *protect.Verdict) {
	if v == nil {
		return
	}
	m.Protection = &v.Protection
	m.ProtectionDetail = &v.Detail
	if v.Quarantined() {
		m.Labels = db.InitialLabels(db.Received, true, nil)
	}
}

// Inbound turns raw RFC 5322 bytes arriving at an inbox into a message to store: parsed,
// labelled received+unread, threaded by its headers, triage pending. The timestamp is the
// receipt time, not the Date header (API-NOTES section 16).
func Inbound(raw []byte, inboxID int64, receivedAt time.Time) (db.NewMessage, error) {
	p, err := Parse(raw)
	if err != nil {
		return db.NewMessage{}, err
	}
	return fromParsed(p, raw, inboxID, receivedAt), nil
}

// received is fromParsed for mail arriving live (SMTP or local delivery), with its
// protection verdict v (nil when this server does not scan). Its triage is analyzed now
// when the provider answers at once (TriageNow), or else queued for analysis in the
// transaction that stores it; quarantined mail is queued, to wait for its release; when
// this server runs no triage (--triage off) it has none (API-NOTES section 8). Fixtures,
// through Inbound, keep the triage they chose and are never analyzed.
func (s *Service) received(p *Parsed, raw []byte, inboxID int64, receivedAt time.Time, v *protect.Verdict, sig db.TriageSignals) db.NewMessage {
	m := fromParsed(p, raw, inboxID, receivedAt)
	m.TriageSignals = sig
	applyVerdict(&m, v)
	fault := s.triageFault(inboxID)
	switch {
	case s.noTriage:
		m.Triage = nil
	case fault != nil:
		m.Triage = &db.Triage{Status: db.TriageFailed, Code: fault.Failure, FailedAt: db.Time{Time: receivedAt}.String()}
	case s.triageNow != nil && (v == nil || !v.Quarantined()):
		m.Triage, m.ChargeTriage = s.triageNow(&m, receivedAt), true
	default:
		m.QueueTriage = true
	}
	return m
}

// triageSignals are what triage may know of p arriving at an inbox besides its words: the
// header fields it reads, and whether p answers mail the inbox sent. They are a hint, so a
// failed look-up is logged and read as "not ours" rather than holding up the message.
func (s *Service) triageSignals(ctx context.Context, p *Parsed, inboxID int64) db.TriageSignals {
	sig := db.TriageSignals{Headers: p.TriageHeaders}
	if s.noTriage {
		return sig
	}
	if parents := db.ReplyParents(p.InReplyTo, p.References); len(parents) > 0 {
		ours, err := s.store.SentAny(ctx, inboxID, parents)
		if err != nil {
			s.log.Warn("triage: could not tell whether a message answers ours", "message", p.MessageID, "err", err)
		}
		sig.RepliesToOurs = ours
	}
	return sig
}

func fromParsed(p *Parsed, raw []byte, inboxID int64, receivedAt time.Time) db.NewMessage {
	atts := make([]db.NewAttachment, len(p.Attachments))
	for i, a := range p.Attachments {
		atts[i] = db.NewAttachment{Filename: a.Filename, ContentType: a.ContentType, Content: a.Content}
	}
	return db.NewMessage{
		InboxID:          inboxID,
		MessageID:        p.MessageID,
		Direction:        db.Received,
		From:             p.From,
		To:               p.To,
		Cc:               p.Cc,
		Bcc:              []string{}, // never known for received mail
		ReplyTo:          p.ReplyTo,
		Subject:          p.Subject,
		Text:             p.Text,
		HTML:             p.HTML,
		Preview:          Preview(p.Text),
		Timestamp:        receivedAt,
		InReplyTo:        p.InReplyTo,
		References:       p.References,
		ThreadCandidates: db.ThreadCandidates(p.References, p.InReplyTo),
		Labels:           db.InitialLabels(db.Received, false, nil),
		Attachments:      atts,
		Triage:           &db.Triage{Status: db.TriagePending},
		Raw:              raw,
	}
}
