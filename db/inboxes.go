package db

import (
	"context"
	"strings"
	"time"
)

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

// InboxAllowance is what decides whether an account may have one more inbox.
type InboxAllowance struct {
	Live  int64  // live inboxes of the account
	Quota *int64 // the operator's quota, when set
	Plan  string
}

// CreateInbox reserves an address and makes it ready. Creating an address the account
// already has answers that inbox again (a pending one gets ready: routing is local to
// this server, so a retried setup always completes). An address is never reused, and one
// off the server's default domain must be a domain of the account. A fixture (Seeding)
// describes a state: its inboxes skip the plan and quota checks and keep their status.
//
// Errors: inbox_conflict (address of another account, or retired), inbox_limit (operator
// quota), billing_limit (plan allowance), domain_not_ready (domain not served for the
// account), not_found (no such account).
func CreateInbox(ctx context.Context, st Units, n NewInbox) (*Inbox, error) {
	addr := strings.ToLower(n.Address)
	var out *Inbox
	err := st.Update(ctx, func(tx Tx) error {
		existing, err := tx.InboxAt(addr)
		if err != nil {
			return err
		}
		if existing != nil {
			out, err = reuseInbox(tx, existing, n)
			return err
		}
		if err := checkInboxDomain(tx, n, addr); err != nil {
			return err
		}
		if !n.Seeding {
			if err := checkInboxAllowance(tx, n.AccountID); err != nil {
				return err
			}
		}
		status := n.DeliveryStatus
		if status == "" {
			status = DeliveryReady
		}
		out = &Inbox{UUID: newUUID(), AccountID: n.AccountID, InboxID: addr, Address: addr, DisplayName: n.DisplayName,
			Group: n.Group, DeliveryStatus: status, SetupAvailable: true, CreatedAt: Time{Time: tx.Now().Truncate(time.Millisecond)}}
		out.ID, err = tx.InsertInbox(out)
		return err
	})
	return out, err
}

// reuseInbox answers a create of an address that exists.
func reuseInbox(tx Tx, in *Inbox, n NewInbox) (*Inbox, error) {
	if in.AccountID != n.AccountID || in.Retired {
		return nil, Errorf(ECodeInboxConflict, "address %s is taken or retired and cannot be reused", in.Address)
	}
	if in.DeliveryStatus == DeliveryPending && !n.Seeding {
		if err := tx.SetDeliveryStatus(in.ID, DeliveryReady); err != nil {
			return nil, err
		}
		in.DeliveryStatus = DeliveryReady
	}
	return in, nil
}

// checkInboxDomain refuses an address on a domain that is neither the server's default nor
// one of the account's.
func checkInboxDomain(tx Tx, n NewInbox, addr string) error {
	_, domain, _ := strings.Cut(addr, "@")
	if domain == n.DefaultDomain {
		return nil
	}
	owner, err := tx.DomainOwner(domain)
	if err != nil {
		return err
	}
	if owner != n.AccountID {
		return Errorf(ECodeDomainNotReady, "domain: %s is not a domain this account can use", domain)
	}
	return nil
}

// checkInboxAllowance refuses one more inbox past the operator's quota or the plan's
// allowance.
func checkInboxAllowance(tx Tx, accountID string) error {
	a, err := tx.InboxAllowance(accountID)
	if err != nil {
		return err
	}
	if a.Quota != nil && a.Live >= *a.Quota {
		return Errorf(ECodeInboxLimit, "the account's inbox quota of %d is reached", *a.Quota)
	}
	if p, ok := PlanByID(a.Plan); ok && a.Live >= p.Included.Inboxes {
		return Errorf(ECodeBillingLimit, "the %s plan includes %d inboxes; upgrade to create more", p.PlanID, p.Included.Inboxes)
	}
	return nil
}
