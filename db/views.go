package db

// What a client sees of a message. These are the visibility rules of API-NOTES sections 3
// and 9 in one place: list items carry no bodies or delivery detail; a quarantined message
// shows an empty preview and no triage; a mailbox key never reads a quarantined body.

// SummaryView is the shape of list, search and getThread items.
func (m Message) SummaryView() Message {
	v := m
	v.Text, v.HTML, v.CcView, v.BccView, v.ReplyToView, v.Delivery = nil, nil, nil, nil, nil, nil
	v.SenderAuthentication = senderAuthentication(m)
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
	v.CcView, v.ReplyToView = listView(m.Cc), listView(m.ReplyTo)
	if m.Direction == Sent {
		v.BccView = listView(m.Bcc)
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

// Values of a received message's senderAuthentication (API-NOTES section 9).
const (
	SenderAuthenticated   = "authenticated"
	SenderUnauthenticated = "unauthenticated"
	SenderUnchecked       = "unchecked"
)

// dmarcPass is the DMARC result mail/protect records for a pass (protect.Pass; that
// package imports this one).
const dmarcPass = "pass"

// senderAuthentication says how far a received message's From can be trusted: its domain
// passed DMARC in the protection scan, or it did not (no policy, a failure, a forgery
// released from quarantine), or nothing scanned it (protection off). Sent mail has none.
func senderAuthentication(m Message) string {
	switch {
	case m.Direction != Received:
		return ""
	case m.Protection == nil:
		return SenderUnchecked
	case m.Protection.Authentication.DMARC == dmarcPass:
		return SenderAuthenticated
	}
	return SenderUnauthenticated
}

// listView is what a full view shows of an address list: an array, empty when there is none.
func listView(s []string) *[]string {
	out := nonNil(s)
	return &out
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
