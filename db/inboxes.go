package db

// NewInbox is an inbox to create.
type NewInbox struct {
	AccountID     string
	Address       string // username@domain; lowercased here
	DisplayName   string
	Group         *string
	DefaultDomain string // the server's own domain, always allowed
	// Fixture loading sets these: a chosen delivery status, and no plan or quota checks
	// (a fixture describes a state, it does not buy inboxes).
	DeliveryStatus string
	Seeding        bool
}

// Clone returns a copy of in that shares nothing with it (a cache hands out copies).
func (in *Inbox) Clone() *Inbox {
	out := *in
	if in.Group != nil {
		g := *in.Group
		out.Group = &g
	}
	return &out
}
