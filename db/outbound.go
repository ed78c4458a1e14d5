package db

import "time"

// UncertainReason is recorded for a recipient whose message was handed to the relay when
// the server stopped (or the connection broke) before the relay answered: it may have been
// accepted, so it is not sent again.
const UncertainReason = "the relay received the whole message but its answer was lost; not resent, to avoid delivering it twice"

// OutboundRecovery is what RecoverOutbound found after a restart.
type OutboundRecovery struct {
	Requeued  int // attempting, relay or parked rows made ready again (to be routed anew)
	Uncertain int // handed-off rows recorded `accepted` and not resent
}

// The states of a queue row of the outbound queue (the stores' outbound tables).
const (
	OutboundReady      = "ready"      // due at its time; a dispatcher routes it
	OutboundRelay      = "relay"      // for a relay worker, due at its time
	OutboundAttempting = "attempting" // a relay worker holds it; the end-of-data dot was not sent
	OutboundHandoff    = "handoff"    // the dot is going or gone: the relay may have the message
	OutboundParked     = "parked"     // version 1 only: no transport existed
)

// SetRecipient records u as recipient's state in the delivery record d at now, and
// reports whether the record changed (then its version grew): a final answer is never
// replaced, except by a complaint.
func (d *Delivery) SetRecipient(recipient string, u RecipientDelivery, now time.Time) bool {
	stamp := Time{Time: now}.String()
	u.Recipient = recipient
	u.UpdatedAt = stamp
	u.Delivered = u.Status == RecipientDelivered || u.Status == RecipientComplained
	changed := false
	for i, r := range d.Recipients {
		if r.Recipient != recipient {
			continue
		}
		if Terminal(r.Status) && u.Status != RecipientComplained {
			return false
		}
		d.Recipients[i] = u
		changed = true
	}
	if !changed {
		d.Recipients = append(d.Recipients, u)
	}
	d.Version++
	d.UpdatedAt = stamp
	return true
}
