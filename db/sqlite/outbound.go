package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The queue's states (migrations/0003_smtp.sql), short.
const (
	outboundReady      = db.OutboundReady
	outboundRelay      = db.OutboundRelay
	outboundAttempting = db.OutboundAttempting
	outboundHandoff    = db.OutboundHandoff
	outboundParked     = db.OutboundParked
)

// FinishOutboundBatch records the outcomes of several delivery attempts in one transaction
// (a group commit for local and sink deliveries). outcomes[i] belongs to jobs[i].
func (s *Store) FinishOutboundBatch(ctx context.Context, jobs []db.OutboundJob, outcomes []db.OutboundOutcome) error {
	if len(jobs) != len(outcomes) {
		return errors.New("db: FinishOutboundBatch: one outcome per job")
	}
	if len(jobs) == 0 {
		return nil
	}
	now := s.Now()
	packed := make([]*packedMessage, len(outcomes))
	for i, o := range outcomes {
		if o.Local != nil {
			packed[i] = pack(o.Local)
		}
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for i := range jobs {
			if err := finishOutbound(ctx, tx, &s.events, jobs[i], outcomes[i], packed[i], now); err != nil {
				return err
			}
		}
		return nil
	})
}

func finishOutbound(ctx context.Context, tx *sql.Tx, sig *eventSignal, job db.OutboundJob, o db.OutboundOutcome, packed *packedMessage, now time.Time) error {
	var still int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbound WHERE id = ?", job.ID).Scan(&still); err != nil {
		return err
	}
	if still == 0 {
		return nil // the inbox was deleted meanwhile, or another attempt finished it
	}
	if o.Local != nil {
		var err error
		if o, err = storeLocal(ctx, tx, sig, o, packed); err != nil {
			return err
		}
	}
	if o.Update.Status != "" {
		if err := updateRecipient(ctx, tx, sig, job.MessageRow, job.Recipient, o.Update, now); err != nil {
			return err
		}
	}
	if o.Update.Status == db.RecipientBounced {
		// API-NOTES section 4: a sent message with a bounced recipient carries `bounced`.
		if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO message_labels(message_id, label) VALUES (?, ?)", job.MessageRow, db.LabelBounced); err != nil {
			return err
		}
		var thread int64
		if err := tx.QueryRowContext(ctx, "SELECT thread_id FROM messages WHERE id = ?", job.MessageRow).Scan(&thread); err != nil {
			return err
		}
		if err := refreshThread(ctx, tx, thread); err != nil {
			return err
		}
	}
	if o.Suppress {
		if err := suppress(ctx, tx, job.InboxID, job.Recipient, o.Update, now); err != nil {
			return err
		}
	}
	var err error
	switch {
	case o.Park:
		_, err = tx.ExecContext(ctx, "UPDATE outbound SET state = ?, state_at = ?, attempts = attempts + 1 WHERE id = ?", outboundParked, millis(now), job.ID)
	case db.Terminal(o.Update.Status) || o.Settled:
		_, err = tx.ExecContext(ctx, "DELETE FROM outbound WHERE id = ?", job.ID)
	case o.RetryAt != nil:
		// A relay attempt retries on the relay; anything else is routed again.
		_, err = tx.ExecContext(ctx, `UPDATE outbound SET state = CASE WHEN state IN (?, ?) THEN ? ELSE ? END,
			state_at = ?, attempts = attempts + 1, next_at = ? WHERE id = ?`,
			outboundAttempting, outboundHandoff, outboundRelay, outboundReady, millis(now), millis(*o.RetryAt), job.ID)
	default:
		err = errors.New("db: outbound outcome decides nothing")
	}
	return err
}

// RouteToRelay hands ready queue rows to the relay workers (ClaimRelay).
func (s *Store) RouteToRelay(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	now := s.Now()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		args := []any{outboundRelay, millis(now), outboundReady}
		for _, id := range ids {
			args = append(args, id)
		}
		_, err := tx.ExecContext(ctx, "UPDATE outbound SET state = ?, state_at = ? WHERE state = ? AND id IN ("+placeholders(len(ids))+")", args...)
		return err
	})
}

// ClaimRelay takes the relay row that is due first for the calling worker (state
// attempting: no other claim returns it until its outcome is recorded). It returns nil
// when none is due.
func (s *Store) ClaimRelay(ctx context.Context) (*db.OutboundJob, error) {
	now := s.Now()
	var job *db.OutboundJob
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		job = nil
		var id int64
		err := tx.QueryRowContext(ctx, `UPDATE outbound SET state = ?, state_at = ? WHERE id =
			(SELECT id FROM outbound WHERE state = ? AND next_at <= ? ORDER BY next_at, id LIMIT 1) RETURNING id`,
			outboundAttempting, millis(now), outboundRelay, millis(now)).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var j db.OutboundJob
		var created int64
		var body []byte
		err = tx.QueryRowContext(ctx, `SELECT o.id, o.message_id, m.inbox_id, m.message_id, o.recipient, o.attempts, m.body,
			m.from_addr, o.created_at FROM outbound o JOIN messages m ON m.id = o.message_id WHERE o.id = ?`, id).
			Scan(&j.ID, &j.MessageRow, &j.InboxID, &j.MessageID, &j.Recipient, &j.Attempts, &body, &j.From, &created)
		if err != nil {
			return err
		}
		if j.Raw, err = loadRaw(ctx, tx, j.MessageRow, body, 0); err != nil {
			return err
		}
		j.CreatedAt = fromMillis(created).Time
		job = &j
		return nil
	})
	return job, err
}

// MarkHandoff records, before the end-of-data dot goes to the relay, that the relay may
// accept the message from now on; after a crash such a row is not sent again. It reports
// false when the row is no longer the worker's (the inbox was deleted): then the message
// must not be completed.
func (s *Store) MarkHandoff(ctx context.Context, jobID int64) (bool, error) {
	now := s.Now()
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE outbound SET state = ?, state_at = ? WHERE id = ? AND state = ?",
			outboundHandoff, millis(now), jobID, outboundAttempting)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// RecoverOutbound runs once before the outbound worker starts. A row a relay worker held
// when the process stopped is safe to send again unless the relay may already have the
// whole message (state handoff): that recipient is recorded `accepted` with
// UncertainReason and the row is dropped, so nothing is ever sent twice and the record
// says what is known. Every other row is made ready, to be routed again under the current
// configuration (rows parked by version 1, which had no transport, included).
func (s *Store) RecoverOutbound(ctx context.Context, provider string) (db.OutboundRecovery, error) {
	now := s.Now()
	var out db.OutboundRecovery
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = db.OutboundRecovery{}
		res, err := tx.ExecContext(ctx, "UPDATE outbound SET state = ?, state_at = ? WHERE state IN (?, ?, ?)",
			outboundReady, millis(now), outboundAttempting, outboundParked, outboundRelay)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		out.Requeued = int(n)
		rows, err := tx.QueryContext(ctx, "SELECT id, message_id, recipient FROM outbound WHERE state = ?", outboundHandoff)
		if err != nil {
			return err
		}
		type row struct {
			id, msg int64
			rcpt    string
		}
		var handed []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.msg, &r.rcpt); err != nil {
				rows.Close()
				return err
			}
			handed = append(handed, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range handed {
			u := db.RecipientDelivery{Status: db.RecipientAccepted, Provider: provider, Reason: db.UncertainReason}
			if err := updateRecipient(ctx, tx, &s.events, r.msg, r.rcpt, u, now); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM outbound WHERE id = ?", r.id); err != nil {
				return err
			}
		}
		out.Uncertain = len(handed)
		return nil
	})
	return out, err
}

// OutboundCounts returns how many queue rows are in each state, every state named (a
// metric's series should not vanish when its count is zero).
func (s *Store) OutboundCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT state, COUNT(*) FROM outbound GROUP BY state")
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	out := map[string]int{outboundReady: 0, outboundRelay: 0, outboundAttempting: 0, outboundHandoff: 0}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[st] = n
	}
	return out, storageError(rows.Err())
}
