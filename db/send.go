package db

import (
	"bytes"
	"context"
	"time"
)

// CommitSend stores a sent message, its idempotency record, one metered send and its
// outbound queue rows as one unit of work. A repeated key with the same fingerprint
// answers the first result again, even when the allowance is spent since; with another
// fingerprint it is a conflict. Recipients on the inbox's suppression list are not queued
// and are recorded rejected from the start, and the message gets the bounced label.
//
// Errors: idempotency_conflict, rate_limited (transient), billing_limit,
// invalid_argument (the Message-ID is in the inbox already).
func CommitSend(ctx context.Context, st Units, r SendRequest) (SendResult, error) {
	p := st.Prepare(&r.Message)
	var out SendResult
	err := st.Update(ctx, func(tx Tx) error {
		var err error
		out, err = commitSend(tx, r, p)
		return err
	})
	return out, err
}

func commitSend(tx Tx, r SendRequest, p Prepared) (SendResult, error) {
	inbox, now := r.Message.InboxID, tx.Now()
	prev, err := tx.SendRecord(inbox, r.IdempotencyKey)
	if err != nil {
		return SendResult{}, err
	}
	if prev != nil {
		return repeatSend(prev, r)
	}
	if err := checkSendRate(tx, inbox, r.RateLimit, now); err != nil {
		return SendResult{}, err
	}
	if err := Charge(tx, r.AccountID, FeatureSends, now); err != nil {
		return SendResult{}, err
	}
	suppressed, err := tx.Suppressed(inbox, r.Recipients)
	if err != nil {
		return SendResult{}, err
	}
	m := p.Message()
	m.Labels, m.Delivery = rejectSuppressed(r.Message.Labels, r.Message.Delivery, suppressed)
	st, err := StoreMessage(tx, p)
	if err != nil {
		return SendResult{}, err
	}
	if st.Existed {
		return SendResult{}, Errorf(ECodeInvalidArgument, "messageId %s already exists in this inbox", r.Message.MessageID)
	}
	queue, rejected := splitSuppressed(r.Recipients, suppressed)
	if err := DeliveryChanged(tx, st.RowID, m.Delivery, rejected); err != nil {
		return SendResult{}, err
	}
	out := SendResult{MessageID: st.MessageID, ThreadID: st.ThreadID}
	if err := tx.RecordSend(inbox, SendRecord{Key: r.IdempotencyKey, Fingerprint: r.Fingerprint, Result: out}, now); err != nil {
		return SendResult{}, err
	}
	return out, tx.EnqueueOutbound(st.RowID, queue, now)
}

// repeatSend answers a send whose idempotency key was used before.
func repeatSend(prev *SendRecord, r SendRequest) (SendResult, error) {
	if !bytes.Equal(prev.Fingerprint, r.Fingerprint) {
		return SendResult{}, Errorf(ECodeIdempotency, "idempotencyKey was already used with different contents")
	}
	out := prev.Result
	out.Deduplicated = true
	return out, nil
}

// checkSendRate refuses a send past the inbox's limit of sends in SendWindow.
func checkSendRate(tx Tx, inboxID int64, limit int, now time.Time) error {
	n, oldest, err := tx.SendsSince(inboxID, now.Add(-SendWindow))
	if err != nil || n < limit {
		return err
	}
	retry := oldest.Add(SendWindow).Sub(now)
	return &Error{Code: ECodeRateLimited, Transient: true, RetryAfter: max(retry, time.Second),
		Message: "this inbox reached its limit of sends in 24 hours; retry later with the same idempotencyKey"}
}

// rejectSuppressed returns the labels and delivery record of a sent message given which
// recipients are suppressed: those are recorded rejected from the start, and a message
// with any of them is labelled bounced. It makes copies; its inputs are not changed.
func rejectSuppressed(labels []string, d *Delivery, suppressed map[string]bool) ([]string, *Delivery) {
	if len(suppressed) == 0 {
		return labels, d
	}
	labels = append(append([]string(nil), labels...), LabelBounced)
	if d == nil {
		return labels, nil
	}
	out := *d
	out.Recipients = append([]RecipientDelivery(nil), d.Recipients...)
	for i, rd := range out.Recipients {
		if suppressed[rd.Recipient] {
			out.Recipients[i] = RecipientDelivery{Recipient: rd.Recipient, Status: RecipientRejected, UpdatedAt: rd.UpdatedAt,
				Reason: SuppressedReason}
		}
	}
	return labels, &out
}

// splitSuppressed splits recipients, in their order, into those to queue and those
// suppressed.
func splitSuppressed(recipients []string, suppressed map[string]bool) (queue, rejected []string) {
	queue = make([]string, 0, len(recipients))
	for _, a := range recipients {
		if suppressed[a] {
			rejected = append(rejected, a)
		} else {
			queue = append(queue, a)
		}
	}
	return queue, rejected
}
