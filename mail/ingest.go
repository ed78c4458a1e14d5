package mail

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// Recipient errors of ResolveRecipient; the SMTP listener turns each into its reply.
var (
	// ErrNotLocal: the domain is not one this server receives mail for. Accepting it would
	// make the server an open relay.
	ErrNotLocal = errors.New("mail: not a domain this server receives mail for")
	// ErrUnknownRecipient: a served domain, but no inbox has the address.
	ErrUnknownRecipient = errors.New("mail: unknown recipient")
	// ErrRecipientRetired: the inbox was deleted; its address is never reused.
	ErrRecipientRetired = errors.New("mail: recipient inbox was deleted")
	// ErrRecipientPending: the inbox exists but its setup is not finished yet.
	ErrRecipientPending = errors.New("mail: recipient inbox setup is not finished")
	// ErrEmptyMessage: the message holds nothing that can be stored.
	ErrEmptyMessage = errors.New("mail: message is empty")
)

// ResolveRecipient finds the inbox an envelope recipient of inbound mail is for: a ready
// inbox on a domain this server serves. It returns the inbox's row id.
//
// Errors: ErrNotLocal, ErrUnknownRecipient, ErrRecipientRetired, ErrRecipientPending, and
// storage errors (transient).
func (s *Service) ResolveRecipient(ctx context.Context, address string) (int64, error) {
	addr, ok := bareAddress(address)
	if !ok {
		return 0, ErrUnknownRecipient
	}
	local, err := s.localDomain(ctx, addr[strings.LastIndexByte(addr, '@')+1:])
	if err != nil {
		return 0, err
	}
	if !local {
		return 0, ErrNotLocal
	}
	return s.localInbox(ctx, addr)
}

// localInbox finds the ready inbox of addr, an address on a domain this server serves: the
// recipient resolution of all inbound mail, over SMTP (ResolveRecipient) or from a send
// to a local address (outbound.go).
//
// Errors: ErrUnknownRecipient, ErrRecipientRetired, ErrRecipientPending, and storage
// errors (transient).
func (s *Service) localInbox(ctx context.Context, addr string) (int64, error) {
	inbox, err := s.store.LocalInbox(ctx, addr)
	switch {
	case db.IsCode(err, db.ECodeNotFound):
		return 0, ErrUnknownRecipient
	case err != nil:
		return 0, err
	case inbox.Retired:
		return 0, ErrRecipientRetired
	case inbox.DeliveryStatus != db.DeliveryReady:
		return 0, ErrRecipientPending
	}
	return inbox.ID, nil
}

// Incoming is a message accepted over SMTP for one or more local inboxes.
type Incoming struct {
	// Data is the message as the client sent it. It is what is parsed, so a message
	// without a Message-ID gets the same synthetic id when the client sends it again.
	Data []byte
	// Trace holds header fields (Received:) prepended to the stored raw copy.
	Trace string
	// Inboxes are the row ids of the recipient inboxes (ResolveRecipient); duplicates are
	// stored once.
	Inboxes []int64
	// The SMTP session the message came in: what SPF and the protection verdict look at.
	RemoteIP net.IP // nil when unknown
	Helo     string // the name given in HELO/EHLO
	MailFrom string // the envelope sender; "" for the null sender <>
}

// Receive stores an incoming message in each of its recipient inboxes: parsed once, one
// copy per inbox, labelled received+unread, threaded by its headers, triage pending, all
// in one transaction. It returns only after that transaction committed, so a caller that
// acknowledges on a nil error never acknowledges mail that could still be lost. Many
// concurrent calls share one commit (the store's group commit).
//
// A recipient inbox deleted after ResolveRecipient named it gets no copy: the others are
// stored, as if the message had come just before the deletion and gone with the inbox,
// and with none left the message is refused (ErrRecipientRetired).
//
// Errors: ErrEmptyMessage, ErrRecipientRetired, ErrScanUnavailable (transient), and
// storage errors (transient: the sender should retry).
func (s *Service) Receive(ctx context.Context, in Incoming) ([]db.Stored, error) {
	a, err := s.arrive(ctx, in.Data, Origin{RemoteIP: in.RemoteIP, Helo: in.Helo, MailFrom: in.MailFrom})
	if err != nil {
		return nil, err
	}
	msgs := s.copies(ctx, a, in.Inboxes, s.store.Now(), in.Trace)
	for len(msgs) > 0 {
		stored, err := db.Deliver(ctx, s.store, msgs)
		if !db.IsCode(err, db.ECodeInboxRetired) {
			return stored, err
		}
		if msgs, err = s.forLiveInboxes(ctx, msgs); err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			return nil, ErrRecipientRetired
		}
	}
	return nil, nil
}

// forLiveInboxes returns the copies of msgs whose inboxes are not deleted. An inbox once
// deleted stays so: each round of Receive drops at least one copy.
func (s *Service) forLiveInboxes(ctx context.Context, msgs []db.NewMessage) ([]db.NewMessage, error) {
	live := msgs[:0:0]
	for _, m := range msgs {
		in, err := s.store.InboxByRowID(ctx, m.InboxID)
		if err != nil {
			return nil, err
		}
		if !in.Retired {
			live = append(live, m)
		}
	}
	return live, nil
}
