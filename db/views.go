package db

// What a client sees of a message. These are the visibility rules of API-NOTES sections 3
// and 9 in one place: list items carry no bodies or delivery detail; a quarantined message
// shows an empty preview and no triage; a mailbox key never reads a quarantined body.

// SummaryView is the shape of list, search and getThread items.
func (m Message) SummaryView() Message {
	v := m
	v.Text, v.HTML, v.Cc, v.Bcc, v.ReplyTo, v.Delivery = nil, nil, nil, nil, nil, nil
	if m.Quarantined {
		v.Preview = ""
		v.Triage = nil
	}
	return v
}

// FullView is the shape of getMessage (and getThread with includeBodies). m must have
// been loaded with its bodies.
func (m Message) FullView(includeHTML, mailboxKey bool) Message {
	v := m.SummaryView()
	v.Cc = nonNil(m.Cc)
	v.ReplyTo = nonNil(m.ReplyTo)
	if m.Direction == Sent {
		v.Bcc = nonNil(m.Bcc)
		v.Delivery = m.Delivery
	}
	if m.Quarantined && mailboxKey {
		return v
	}
	text := m.BodyText
	v.Text = &text
	if includeHTML && m.BodyHTML != "" {
		html := m.BodyHTML
		v.HTML = &html
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MailboxView is the inbox as a mailbox key sees it: no group or setup state.
type MailboxView struct {
	InboxID     string `json:"inboxId"`
	Address     string `json:"address"`
	DisplayName string `json:"displayName,omitempty"`
	CreatedAt   Time   `json:"createdAt"`
}

// MailboxView returns the reduced inbox a mailbox key may see.
func (in Inbox) MailboxView() MailboxView {
	return MailboxView{InboxID: in.InboxID, Address: in.Address, DisplayName: in.DisplayName, CreatedAt: in.CreatedAt}
}
