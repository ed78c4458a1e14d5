package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// ClaimOutbound returns up to limit jobs that are due, without their Raw bytes: a batch
// routes many recipients, most of whom need no copy of the message, and the bytes of 500
// large messages at once would be gigabytes (MessageRaw reads them one message at a time).
func (s *Store) ClaimOutbound(ctx context.Context, limit int) ([]db.OutboundJob, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT o.id, o.message_id, m.inbox_id, m.message_id, o.recipient, o.attempts,
		m.from_addr, o.created_at
		FROM outbound o JOIN messages m ON m.id = o.message_id
		WHERE o.state = 'ready' AND o.next_at <= ? ORDER BY o.next_at, o.id LIMIT +?`, millis(s.Now()), limit)
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	var out []db.OutboundJob
	for rows.Next() {
		var j db.OutboundJob
		var created int64
		if err := rows.Scan(&j.ID, &j.MessageRow, &j.InboxID, &j.MessageID, &j.Recipient, &j.Attempts, &j.From, &created); err != nil {
			return nil, err
		}
		j.CreatedAt = fromMillis(created).Time
		out = append(out, j)
	}
	return out, storageError(rows.Err())
}

// MessageRaw returns the raw RFC 5322 bytes of message row.
//
// Errors: not_found (the message was deleted).
func (s *Store) MessageRaw(ctx context.Context, messageRow int64) ([]byte, error) {
	var raw []byte
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var body []byte
		err := tx.QueryRowContext(ctx, "SELECT body FROM messages WHERE id = ?", messageRow).Scan(&body)
		if errors.Is(err, sql.ErrNoRows) {
			return db.Errorf(db.ECodeNotFound, "message not found")
		}
		if err != nil {
			return err
		}
		raw, err = loadRaw(ctx, tx, messageRow, body, 0)
		return err
	})
	return raw, err
}

// FinishOutbound records the outcome of a delivery attempt. The delivery record's
// version grows with every change, and a terminal status is never replaced.
func (s *Store) FinishOutbound(ctx context.Context, job db.OutboundJob, o db.OutboundOutcome) error {
	return s.FinishOutboundBatch(ctx, []db.OutboundJob{job}, []db.OutboundOutcome{o})
}

func updateRecipient(ctx context.Context, tx *sql.Tx, sig *eventSignal, messageRow int64, recipient string, u db.RecipientDelivery, now time.Time) error {
	var raw sql.NullString
	if err := tx.QueryRowContext(ctx, "SELECT delivery FROM messages WHERE id = ?", messageRow).Scan(&raw); err != nil {
		return err
	}
	var d db.Delivery
	if raw.Valid {
		if err := json.Unmarshal([]byte(raw.String), &d); err != nil {
			return err
		}
	}
	if !d.SetRecipient(recipient, u, now) {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE messages SET delivery = ? WHERE id = ?", jsonText(&d), messageRow); err != nil {
		return err
	}
	var bounced []string
	if u.Status == db.RecipientBounced {
		bounced = []string{recipient}
	}
	return db.DeliveryChanged(&unit{ctx: ctx, tx: tx, now: now, events: sig}, messageRow, &d, bounced)
}

// ParkedCount returns how many queue rows wait for a transport; the server logs it.
func (s *Store) ParkedCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbound WHERE state = 'parked'").Scan(&n)
	return n, storageError(err)
}
