package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The triage queue outside a unit of work (db.TriageQueue); claims are in tx_queues.go,
// where the lease that keeps two processes from analyzing one message is taken.

// TriageTexts fills the Text of claimed jobs with the start of their plain bodies (cut in
// the database, so a long body never leaves it whole); a message deleted since its claim
// is left out.
func (s *Store) TriageTexts(ctx context.Context, jobs []db.TriageJob) ([]db.TriageJob, error) {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.MessageRow
	}
	rows, err := s.pool.Query(ctx, "SELECT id, left(body_text, $2) FROM messages WHERE id = ANY($1)", ids, db.TriageTextChars+1)
	if err != nil {
		return nil, storageError(err)
	}
	texts := map[int64]string{}
	for rows.Next() {
		var row int64
		var text string
		if err := rows.Scan(&row, &text); err != nil {
			rows.Close()
			return nil, storageError(err)
		}
		texts[row] = text
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, storageError(err)
	}
	out := make([]db.TriageJob, 0, len(jobs))
	for _, j := range jobs {
		if text, ok := texts[j.MessageRow]; ok {
			j.Text = text
			out = append(out, j)
		}
	}
	return out, nil
}

// FinishTriage records outcomes of analyses, all in one transaction. A result is stored
// with its filter columns and the message leaves the queue; a failed analysis gives back
// the triage unit it spent. A retry counts the failed attempt, reschedules and ends the
// lease. An outcome for a message no longer queued (deleted meanwhile, or finished by a
// process that took it over after this one's lease ended) changes nothing.
func (s *Store) FinishTriage(ctx context.Context, outcomes []db.TriageOutcome) error {
	for _, o := range outcomes {
		if o.Result != nil && o.Result.Status != db.TriageComplete && o.Result.Status != db.TriageFailed {
			return errors.New("db: a triage result is complete or failed")
		}
	}
	return s.write(ctx, func(w *wtx) error {
		for _, o := range outcomes {
			if err := w.finishTriage(o); err != nil {
				return err
			}
		}
		return nil
	})
}

func (w *wtx) finishTriage(o db.TriageOutcome) error {
	if o.Result == nil {
		_, err := w.exec("UPDATE triage_queue SET attempts = attempts + 1, next_at = $1, leased_until = 0 WHERE message_id = $2",
			millis(o.RetryAt), o.MessageRow)
		return err
	}
	// The queue row is locked: of two processes finishing one message, the second finds
	// it gone.
	var accountID string
	var charged *string
	err := w.queryRow(`SELECT i.account_id, q.charged_period FROM triage_queue q JOIN messages m ON m.id = q.message_id
		JOIN inboxes i ON i.id = m.inbox_id WHERE q.message_id = $1 FOR UPDATE OF q`, o.MessageRow).Scan(&accountID, &charged)
	if noRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := w.exec("DELETE FROM triage_queue WHERE message_id = $1", o.MessageRow); err != nil {
		return err
	}
	if o.Result.Status == db.TriageFailed && charged != nil {
		if _, err := w.exec(`UPDATE usage SET used = GREATEST(used - 1, 0) WHERE account_id = $1 AND period = $2 AND feature = $3`,
			accountID, *charged, db.FeatureTriage); err != nil {
			return err
		}
	}
	return w.setTriage(o.MessageRow, o.Result)
}

// TriageQueueLen reports how many messages wait for triage (quarantined ones included).
func (s *Store) TriageQueueLen(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM triage_queue").Scan(&n)
	return n, storageError(err)
}

// NextTriageDue reports when the earliest queued, non-quarantined message can be claimed:
// when it is due, or when the lease of the process analyzing it ends. False when none
// waits.
func (s *Store) NextTriageDue(ctx context.Context) (time.Time, bool, error) {
	var at *int64
	err := s.pool.QueryRow(ctx, `SELECT MIN(GREATEST(q.next_at, q.leased_until)) FROM triage_queue q
		JOIN messages m ON m.id = q.message_id WHERE NOT m.quarantined`).Scan(&at)
	if err != nil {
		return time.Time{}, false, storageError(err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return fromMillis(*at).Time, true, nil
}

// SentAny reports whether an inbox sent a message whose Message-ID is one of ids.
func (s *Store) SentAny(ctx context.Context, inboxID int64, ids []string) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	var found bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM messages
		WHERE inbox_id = $1 AND direction = $2 AND message_id = ANY($3))`, inboxID, string(db.Sent), ids).Scan(&found)
	return found, storageError(err)
}
