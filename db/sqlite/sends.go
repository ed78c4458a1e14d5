package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// CommitSend stores a sent message, its idempotency record, one metered send and its
// outbound queue rows in one transaction. A repeated key with the same fingerprint
// answers the first result again, even when the allowance is spent since.
//
// Errors: idempotency_conflict, rate_limited (transient), billing_limit.
func (s *Store) CommitSend(ctx context.Context, r db.SendRequest) (db.SendResult, error) {
	ctx = noCancel(ctx)
	now := s.Now()
	packed := pack(&r.Message)
	var out db.SendResult
	err := s.write(ctx, func(tx *sql.Tx) error {
		inbox := r.Message.InboxID
		var fp []byte
		err := tx.QueryRowContext(ctx, "SELECT fingerprint, message_id, thread_id FROM sends WHERE inbox_id = ? AND idem_key = ?",
			inbox, r.IdempotencyKey).Scan(&fp, &out.MessageID, &out.ThreadID)
		if err == nil {
			if !bytes.Equal(fp, r.Fingerprint) {
				return db.Errorf(db.ECodeIdempotency, "idempotencyKey was already used with different contents")
			}
			out.Deduplicated = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var count int
		var oldest sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*), MIN(created_at) FROM sends WHERE inbox_id = ? AND created_at > ?",
			inbox, millis(now.Add(-db.SendWindow))).Scan(&count, &oldest); err != nil {
			return err
		}
		if count >= r.RateLimit {
			retry := time.UnixMilli(oldest.Int64).Add(db.SendWindow).Sub(now)
			return &db.Error{Code: db.ECodeRateLimited, Transient: true, RetryAfter: max(retry, time.Second),
				Message: "this inbox reached its limit of sends in 24 hours; retry later with the same idempotencyKey"}
		}
		if err := chargeUnit(ctx, tx, r.AccountID, db.FeatureSends, now); err != nil {
			return err
		}
		if err := applySuppression(ctx, tx, &r); err != nil {
			return err
		}
		st, err := insertMessage(ctx, tx, &r.Message, packed)
		if err != nil {
			return err
		}
		if st.Existed {
			return db.Errorf(db.ECodeInvalidArgument, "messageId %s already exists in this inbox", r.Message.MessageID)
		}
		out = db.SendResult{MessageID: st.MessageID, ThreadID: st.ThreadID}
		if _, err := tx.ExecContext(ctx, "INSERT INTO sends(inbox_id, idem_key, fingerprint, message_id, thread_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
			inbox, r.IdempotencyKey, r.Fingerprint, st.MessageID, st.ThreadID, millis(now)); err != nil {
			return err
		}
		for _, rcpt := range r.Recipients {
			if _, err := tx.ExecContext(ctx, "INSERT INTO outbound(message_id, recipient, state, next_at, created_at) VALUES (?, ?, 'ready', ?, ?)",
				st.RowID, rcpt, millis(now), millis(now)); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// ClaimOutbound returns up to limit jobs that are due, without their Raw bytes: a batch
// routes many recipients, most of whom need no copy of the message, and the bytes of 500
// large messages at once would be gigabytes (MessageRaw reads them one message at a time).
func (s *Store) ClaimOutbound(ctx context.Context, limit int) ([]db.OutboundJob, error) {
	ctx = noCancel(ctx)
	rows, err := s.r.QueryContext(ctx, `SELECT o.id, o.message_id, m.inbox_id, m.message_id, o.recipient, o.attempts,
		m.from_addr, o.created_at
		FROM outbound o JOIN messages m ON m.id = o.message_id
		WHERE o.state = 'ready' AND o.next_at <= ? ORDER BY o.next_at, o.id LIMIT ?`, millis(s.Now()), limit)
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
	ctx = noCancel(ctx)
	var raw []byte
	err := s.read(ctx, func(tx *sql.Tx) error {
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
	ctx = noCancel(ctx)
	return s.FinishOutboundBatch(ctx, []db.OutboundJob{job}, []db.OutboundOutcome{o})
}

func updateRecipient(ctx context.Context, tx *sql.Tx, messageRow int64, recipient string, u db.RecipientDelivery, now time.Time) error {
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
	stamp := db.Time{Time: now}.String()
	u.Recipient = recipient
	u.UpdatedAt = stamp
	u.Delivered = u.Status == db.RecipientDelivered || u.Status == db.RecipientComplained
	changed := false
	for i, r := range d.Recipients {
		if r.Recipient != recipient {
			continue
		}
		if db.Terminal(r.Status) && !(u.Status == db.RecipientComplained) {
			return nil // a final answer is never replaced, except by a complaint
		}
		d.Recipients[i] = u
		changed = true
	}
	if !changed {
		d.Recipients = append(d.Recipients, u)
	}
	d.Version++
	d.UpdatedAt = stamp
	_, err := tx.ExecContext(ctx, "UPDATE messages SET delivery = ? WHERE id = ?", jsonText(&d), messageRow)
	return err
}

// ParkedCount returns how many queue rows wait for a transport; the server logs it.
func (s *Store) ParkedCount(ctx context.Context) (int64, error) {
	ctx = noCancel(ctx)
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbound WHERE state = 'parked'").Scan(&n)
	return n, storageError(err)
}
