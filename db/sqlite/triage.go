package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/inboxd/inboxd/db"
)

// enqueueTriage puts a just-stored message on the triage queue, due at once, with what
// triage knows of it besides its words.
func enqueueTriage(ctx context.Context, tx *sql.Tx, rowID int64, at time.Time, sig db.TriageSignals) error {
	_, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO triage_queue(message_id, next_at, created_at, signals) VALUES (?, 0, ?, ?)",
		rowID, millis(at), jsonText(sig).String)
	return err
}

// DueTriage, MarkTriageCharged and SkipTriage are what db.ClaimTriage reads and writes.

func (u *unit) DueTriage(now time.Time, limit int, skip []int64) ([]db.QueuedTriage, error) {
	q := `SELECT q.message_id, q.attempts, q.charged_period IS NOT NULL, i.account_id, m.message_id, m.from_addr, m.to_addrs,
		m.cc_addrs, m.subject, m.ts, q.signals
		FROM triage_queue q JOIN messages m ON m.id = q.message_id JOIN inboxes i ON i.id = m.inbox_id
		WHERE q.next_at <= ? AND m.quarantined = 0`
	args := []any{millis(now)}
	if len(skip) > 0 {
		q += " AND q.message_id NOT IN (" + placeholders(len(skip)) + ")"
		for _, id := range skip {
			args = append(args, id)
		}
	}
	q += " ORDER BY q.next_at, q.message_id LIMIT " + strconv.Itoa(limit)
	rows, err := u.tx.QueryContext(u.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanRows(rows, db.ScanQueuedTriage)
}

func (u *unit) MarkTriageCharged(messageRow int64, period string) error {
	_, err := u.tx.ExecContext(u.ctx, "UPDATE triage_queue SET charged_period = ? WHERE message_id = ?", period, messageRow)
	return err
}

func (u *unit) SkipTriage(messageRow int64) error { return skipTriage(u.ctx, u.tx, messageRow) }

// TriageTexts fills the Text of claimed jobs from their packed bodies, read and unpacked
// off the writer; a message deleted since its claim is left out.
func (s *Store) TriageTexts(ctx context.Context, jobs []db.TriageJob) ([]db.TriageJob, error) {
	bodies := map[int64][]byte{}
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		args := make([]any, len(jobs))
		for i, j := range jobs {
			args[i] = j.MessageRow
		}
		rows, err := tx.QueryContext(ctx, "SELECT id, body FROM messages WHERE id IN ("+placeholders(len(jobs))+")", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var row int64
			var body []byte
			if err := rows.Scan(&row, &body); err != nil {
				return err
			}
			bodies[row] = body
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]db.TriageJob, 0, len(jobs))
	for _, j := range jobs {
		body, ok := bodies[j.MessageRow]
		if !ok {
			continue
		}
		if j.Text, err = bodyTextPrefix(body, db.TriageTextChars+1); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// skipTriage drops a message from the queue with no triage at all.
func skipTriage(ctx context.Context, tx *sql.Tx, rowID int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM triage_queue WHERE message_id = ?", rowID); err != nil {
		return err
	}
	return setTriage(ctx, tx, rowID, nil)
}

// setTriage stores a message's triage and the copies list filters match on (only a
// complete result has them), and tells the search index the message changed.
func setTriage(ctx context.Context, tx *sql.Tx, rowID int64, t *db.Triage) error {
	var js, cat, reply, urg sql.NullString
	if t != nil {
		js = jsonText(t)
		if t.Status == db.TriageComplete {
			cat, reply, urg = triageFilterColumns(t)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE messages SET triage_z = ?, tri_category = ?, tri_reply = ?, tri_urgency = ? WHERE id = ?",
		packJSON(js), cat, reply, urg, rowID); err != nil {
		return err
	}
	// The search index holds the triage values its filters match on.
	return enqueueIndex(ctx, tx, "m.id = ?", rowID)
}

// FinishTriage records outcomes of analyses, all in one transaction. A result is stored
// with its filter columns and the message leaves the queue; a failed analysis gives back
// the triage unit it spent. A retry counts the failed attempt and reschedules. SQLite's
// claims lease nothing: one process works the queue, and its worker claims no message it
// holds, so a claim holds until its message leaves the queue. An outcome for a message no
// longer queued (deleted meanwhile) changes nothing and is returned as not kept.
func (s *Store) FinishTriage(ctx context.Context, outcomes []db.TriageOutcome) ([]int64, error) {
	if err := db.CheckTriageOutcomes(outcomes); err != nil {
		return nil, err
	}
	var notKept []int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		notKept = notKept[:0]
		for _, o := range outcomes {
			kept, err := finishTriage(ctx, tx, o)
			if err != nil {
				return err
			}
			if !kept {
				notKept = append(notKept, o.MessageRow)
			}
		}
		return nil
	})
	return notKept, err
}

// finishTriage records one outcome and reports whether its message was still queued.
func finishTriage(ctx context.Context, tx *sql.Tx, o db.TriageOutcome) (bool, error) {
	if o.Result == nil {
		res, err := tx.ExecContext(ctx, "UPDATE triage_queue SET attempts = attempts + 1, next_at = ? WHERE message_id = ?", millis(o.RetryAt), o.MessageRow)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}
	var accountID string
	var charged sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT i.account_id, q.charged_period FROM triage_queue q JOIN messages m ON m.id = q.message_id
		JOIN inboxes i ON i.id = m.inbox_id WHERE q.message_id = ?`, o.MessageRow).Scan(&accountID, &charged)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM triage_queue WHERE message_id = ?", o.MessageRow); err != nil {
		return false, err
	}
	if o.Result.Status == db.TriageFailed && charged.Valid {
		if _, err := tx.ExecContext(ctx, `UPDATE usage SET used = MAX(used - 1, 0) WHERE account_id = ? AND period = ? AND feature = ?`,
			accountID, charged.String, db.FeatureTriage); err != nil {
			return false, err
		}
	}
	return true, setTriage(ctx, tx, o.MessageRow, o.Result)
}

// TriageQueueLen reports how many messages wait for triage (quarantined ones included).
func (s *Store) TriageQueueLen(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM triage_queue").Scan(&n)
	return n, storageError(err)
}

// NextTriageDue reports when the earliest queued, non-quarantined message comes due, and
// false when none waits.
func (s *Store) NextTriageDue(ctx context.Context) (time.Time, bool, error) {
	var at sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT MIN(q.next_at) FROM triage_queue q JOIN messages m ON m.id = q.message_id
		WHERE m.quarantined = 0`).Scan(&at)
	if err != nil {
		return time.Time{}, false, storageError(err)
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	return fromMillis(at.Int64).Time, true, nil
}

// SentAny reports whether an inbox sent a message whose Message-ID is one of ids.
func (s *Store) SentAny(ctx context.Context, inboxID int64, ids []string) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	args := []any{inboxID, db.Sent}
	for _, id := range ids {
		args = append(args, id)
	}
	var found int
	err := s.r.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM messages WHERE inbox_id = ? AND direction = ? AND message_id IN ("+
		placeholders(len(ids))+"))", args...).Scan(&found)
	return found == 1, storageError(err)
}
