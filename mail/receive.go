package mail

import (
	"time"

	"github.com/inboxd/inboxd/db"
)

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
		ThreadCandidates: ThreadCandidates(p.References, p.InReplyTo),
		Labels:           db.InitialLabels(db.Received, false, nil),
		Attachments:      atts,
		Triage:           &db.Triage{Status: db.TriagePending},
		Raw:              raw,
	}
}
