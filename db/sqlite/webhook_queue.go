package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The queue of webhook deliveries (db.Webhooks' Claim, Finish, NextHookDue). A worker
// leases what it claims (claimed_until, with a token of its own in claim): a worker that
// dies leaves its rows to be claimed again once the lease ends, by any process sharing
// the store, and an attempt is recorded only by the lease that made it.

// ClaimHookDeliveries leases due pending deliveries, at most c.PerWebhook less what the
// caller has in flight of each webhook, so one slow endpoint's backlog never fills a
// claim that other endpoints' deliveries wait behind. Its work is bounded by what it
// claims and the number of webhooks, not by the backlog: an endpoint that is down for
// hours may have thousands of deliveries waiting.
func (s *Store) ClaimHookDeliveries(ctx context.Context, c db.HookClaim) ([]db.HookJob, error) {
	now := s.Now()
	// The worker claims after every commit with events, most of which leave it nothing
	// to claim (an account without webhooks, or every due webhook at its bound): a read
	// picks the rows without taking the writer, and the write leases those still due.
	var picked []any
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
		picked, err = dueHookRows(ctx, tx, c, now)
		return err
	})
	if err != nil || len(picked) == 0 {
		return nil, err
	}
	token := newRowUUID()
	var jobs []db.HookJob
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		jobs = nil
		until := now.Add(c.Lease)
		ids, err := leaseHookRows(ctx, tx, picked, now, until, token)
		if err != nil || len(ids) == 0 {
			return err
		}
		jobs, err = loadHookJobs(ctx, tx, ids, token, time.UnixMilli(millis(until)))
		return err
	})
	if err != nil {
		return nil, storageError(err)
	}
	return jobs, nil
}

// leaseHookRows leases the picked rows that are still due, unleased and of an enabled
// webhook (another worker, or a change to the webhook, may have come between the pick
// and the write) and returns them.
func leaseHookRows(ctx context.Context, tx *sql.Tx, picked []any, now, until time.Time, token string) ([]any, error) {
	args := append([]any{millis(until), token, millis(now)}, picked...)
	return queryIDs(ctx, tx, `UPDATE webhook_deliveries SET claimed_until = ?1, claim = ?2
		WHERE status = 'pending' AND next_attempt_at <= ?3 AND claimed_until <= ?3
		AND webhook_id IN (SELECT id FROM webhooks WHERE enabled = 1) AND id IN (`+placeholders(len(picked))+") RETURNING id", args...)
}

// dueHookRows picks the rows to claim: due, not leased, of enabled webhooks, oldest first
// within each webhook and no more than its free slots, each webhook's read from the front
// of its own queue (migration 0016's index).
func dueHookRows(ctx context.Context, tx *sql.Tx, c db.HookClaim, now time.Time) ([]any, error) {
	hooks, err := webhooksWithDue(ctx, tx, now)
	if err != nil {
		return nil, err
	}
	var ids []any
	for _, w := range hooks {
		room := c.Room(w, len(ids))
		if room <= 0 {
			continue
		}
		front, err := queryIDs(ctx, tx, `SELECT id FROM webhook_deliveries WHERE webhook_id = +?1 AND status = 'pending'
			AND next_attempt_at <= ?2 AND claimed_until <= ?2 ORDER BY next_attempt_at, id LIMIT +?3`, w, millis(now), room)
		if err != nil {
			return nil, err
		}
		ids = append(ids, front...)
	}
	return ids, nil
}

// queryIDs runs a query of one integer column and returns its values.
func queryIDs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]any, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// webhooksWithDue returns the enabled webhooks with a due delivery, the one due longest
// first, so that a claim smaller than the work serves the oldest first.
func webhooksWithDue(ctx context.Context, tx *sql.Tx, now time.Time) ([]int64, error) {
	// Each webhook's first unleased delivery, read from the front of its queue: only rows
	// leased now (at most what is in flight) are passed over.
	rows, err := tx.QueryContext(ctx, `SELECT w.id, (SELECT d.next_attempt_at FROM webhook_deliveries d
			WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.claimed_until <= ?1
			ORDER BY d.next_attempt_at, d.id LIMIT 1) AS first
		FROM webhooks w WHERE w.enabled = 1 AND first <= ?1 ORDER BY first, w.id`, millis(now))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		var first sql.NullInt64
		if err := rows.Scan(&id, &first); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// loadHookJobs reads the claimed rows with their webhooks and events.
func loadHookJobs(ctx context.Context, tx *sql.Tx, ids []any, token string, leaseEnds time.Time) ([]db.HookJob, error) {
	rows, err := tx.QueryContext(ctx, "SELECT d.id, d.attempt, d.created_at, d.event_seq, "+db.WebhookColumns+
		" FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id IN ("+placeholders(len(ids))+") ORDER BY d.id", ids...)
	if err != nil {
		return nil, err
	}
	jobs, err := db.ScanRows(rows, func(r db.RowScanner) (db.HookJob, error) { return db.ScanHookJob(r, token, leaseEnds) })
	rows.Close()
	if err != nil {
		return nil, err
	}
	events, err := eventsBySeq(ctx, tx, idArgs(db.HookJobSeqs(jobs)))
	if err != nil {
		return nil, err
	}
	db.AttachHookEvents(jobs, events)
	return jobs, nil
}

func eventsBySeq(ctx context.Context, tx *sql.Tx, seqs []any) (map[int64]db.Event, error) {
	rows, err := tx.QueryContext(ctx, eventRows+" WHERE e.seq IN ("+placeholders(len(seqs))+")", seqs...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanEventsBySeq(rows)
}

// FinishHookDeliveries records attempts, each when the lease that made it still holds,
// in one write.
func (s *Store) FinishHookDeliveries(ctx context.Context, done []db.HookAttempt) ([]bool, error) {
	kept := make([]bool, len(done))
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for i, a := range done {
			res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET attempt = attempt + 1, status = ?, response_status = ?,
				error = ?, last_attempt_at = ?, next_attempt_at = ?, delivered_at = ?, claimed_until = 0, claim = NULL
				WHERE id = ? AND claim = ?`, outcomeArgs(a)...)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			kept[i] = n == 1
		}
		return nil
	})
	if err != nil {
		return nil, storageError(err)
	}
	return kept, nil
}

// outcomeArgs are the arguments of FinishHookDeliveries' statement for one attempt.
func outcomeArgs(a db.HookAttempt) []any {
	o := a.Outcome
	var status sql.NullInt64
	if o.ResponseStatus != 0 {
		status = sql.NullInt64{Int64: int64(o.ResponseStatus), Valid: true}
	}
	var errText, next, delivered any
	if o.Error != "" {
		errText = o.Error
	}
	switch o.Status {
	case db.HookPending:
		next = millis(o.Next)
	case db.HookDelivered:
		delivered = millis(o.At)
	}
	return []any{o.Status, status, errText, millis(o.At), next, delivered, a.Job.Row, a.Job.Claim}
}

// ReleaseHookDelivery ends the lease of a claimed delivery, when it is still j's.
func (s *Store) ReleaseHookDelivery(ctx context.Context, j db.HookJob) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE webhook_deliveries SET claimed_until = 0, claim = NULL WHERE id = ? AND claim = ?", j.Row, j.Claim)
		return err
	})
	return storageError(err)
}

// NextHookDue reports when the earliest pending delivery of an enabled webhook can be
// claimed: when it is due, or when its lease ends.
func (s *Store) NextHookDue(ctx context.Context) (time.Time, bool, error) {
	var at sql.NullInt64
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT MIN(MAX(d.next_attempt_at, d.claimed_until)) FROM webhook_deliveries d
			JOIN webhooks w ON w.id = d.webhook_id WHERE d.status = 'pending' AND w.enabled = 1`).Scan(&at)
	})
	if err != nil || !at.Valid {
		return time.Time{}, false, err
	}
	return time.UnixMilli(at.Int64).UTC(), true, nil
}

// HookBacklog counts the pending deliveries.
func (s *Store) HookBacklog(ctx context.Context) (int64, error) {
	var n int64
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").Scan(&n)
	})
	return n, err
}
