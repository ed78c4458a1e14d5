package postgres

import (
	"context"
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

// FinishTriage records outcomes of analyses, all in one transaction, each only while the
// message is still leased to its claim (leased_until is the claim's LeaseEnds: every claim
// moves it later, a retry clears it). A result is stored with its filter columns and the
// message leaves the queue; a failed analysis gives back the triage unit it spent. A retry
// counts the failed attempt, reschedules and ends the lease. An outcome whose claim no
// longer holds (the message deleted meanwhile, or claimed by a process that took it over
// after this one's lease ended) changes nothing and is returned as not kept.
func (s *Store) FinishTriage(ctx context.Context, outcomes []db.TriageOutcome) ([]int64, error) {
	if err := db.CheckTriageOutcomes(outcomes); err != nil {
		return nil, err
	}
	var notKept []int64
	err := s.write(ctx, func(w *wtx) error {
		notKept = notKept[:0]
		for _, o := range outcomes {
			kept, err := w.finishTriage(o)
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

// finishTriage records one outcome and reports whether its claim held.
func (w *wtx) finishTriage(o db.TriageOutcome) (bool, error) {
	if o.LeaseEnds.IsZero() {
		return false, nil // no claim of this store's: every claim leases
	}
	lease := millis(o.LeaseEnds)
	if o.Result == nil {
		tag, err := w.exec("UPDATE triage_queue SET attempts = attempts + 1, next_at = $1, leased_until = 0 WHERE message_id = $2 AND leased_until = $3",
			millis(o.RetryAt), o.MessageRow, lease)
		return tag.RowsAffected() == 1, err
	}
	// The queue row is locked, and its lease checked again once a claim that held it has
	// committed: of two processes finishing one message, or one finishing it while another
	// claims it, the second finds it gone or no longer its.
	var accountID string
	var charged *string
	err := w.queryRow(`SELECT i.account_id, q.charged_period FROM triage_queue q JOIN messages m ON m.id = q.message_id
		JOIN inboxes i ON i.id = m.inbox_id WHERE q.message_id = $1 AND q.leased_until = $2 FOR UPDATE OF q`, o.MessageRow, lease).Scan(&accountID, &charged)
	if noRows(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := w.exec("DELETE FROM triage_queue WHERE message_id = $1", o.MessageRow); err != nil {
		return false, err
	}
	if o.Result.Status == db.TriageFailed && charged != nil {
		if _, err := w.exec(`UPDATE usage SET used = GREATEST(used - 1, 0) WHERE account_id = $1 AND period = $2 AND feature = $3`,
			accountID, *charged, db.FeatureTriage); err != nil {
			return false, err
		}
	}
	return true, w.setTriage(o.MessageRow, o.Result)
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
