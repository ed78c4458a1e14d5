package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/inboxd/inboxd/db"
)

// Webhooks outside a unit of work (db.Webhooks): reads, and the queue of deliveries that
// the webhook workers of every process take from. A worker leases what it claims
// (claimed_until, with a token of its own in claim): a worker that dies leaves its rows to
// be claimed again once the lease ends, by any process, and an attempt is recorded only
// by the lease that made it.

// GetWebhook returns a webhook of an account.
//
// Errors: not_found (unknown, or another account's).
func (s *Store) GetWebhook(ctx context.Context, accountID, webhookID string) (*db.Webhook, error) {
	w, err := db.ScanWebhook(s.pool.QueryRow(ctx, "SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.uuid = $1 AND w.account_id = $2",
		webhookID, accountID))
	if noRows(err) {
		return nil, db.WebhookNotFound(webhookID)
	}
	return w, storageError(err)
}

// ListWebhooks returns one page of an account's webhooks, newest first.
//
// Errors: invalid_argument (page token).
func (s *Store) ListWebhooks(ctx context.Context, accountID string, limit int, pageToken string) ([]db.Webhook, string, error) {
	scope := db.ListScope("webhooks", accountID)
	c, err := s.tokens.DecodePageToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	var args sqlArgs
	q := "SELECT " + db.WebhookColumns + " FROM webhooks w WHERE w.account_id = " + args.add(accountID)
	rows, err := s.pool.Query(ctx, q+keyset("w.created_at", "w.id", true, c, limit, &args), args...)
	if err != nil {
		return nil, "", storageError(err)
	}
	defer rows.Close()
	out, err := db.ScanWebhooks(rows)
	if err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(w db.Webhook) (int64, int64) { return millis(w.CreatedAt.Time), w.Row })
	return out, next, nil
}

// ListHookDeliveries returns one page of a webhook's deliveries, newest first.
//
// Errors: not_found (webhook), invalid_argument (page token).
func (s *Store) ListHookDeliveries(ctx context.Context, accountID, webhookID string, limit int, pageToken string) ([]db.HookDelivery, string, error) {
	w, err := s.GetWebhook(ctx, accountID, webhookID)
	if err != nil {
		return nil, "", err
	}
	scope := db.ListScope("webhook-deliveries", accountID, webhookID)
	c, err := s.tokens.DecodePageToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	var args sqlArgs
	q := `SELECT d.id, e.event_id, e.type, d.attempt, d.status, d.response_status, d.error, d.created_at,
		d.last_attempt_at, d.next_attempt_at, d.delivered_at FROM webhook_deliveries d JOIN events e ON e.seq = d.event_seq
		WHERE d.webhook_id = ` + args.add(w.Row)
	rows, err := s.pool.Query(ctx, q+keyset("d.created_at", "d.id", true, c, limit, &args), args...)
	out, err := collect(rows, err, scanHookDelivery)
	if err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(d db.HookDelivery) (int64, int64) { return millis(d.CreatedAt.Time), d.Row })
	return out, next, nil
}

func scanHookDelivery(r pgx.CollectableRow) (db.HookDelivery, error) {
	var (
		d                       db.HookDelivery
		errText                 *string
		created                 int64
		last, next, deliveredAt *int64
	)
	if err := r.Scan(&d.Row, &d.EventID, &d.Type, &d.Attempt, &d.Status, &d.ResponseStatus, &errText, &created, &last, &next,
		&deliveredAt); err != nil {
		return d, err
	}
	d.CreatedAt = fromMillis(created)
	d.Error = deref(errText)
	d.LastAttemptAt, d.DeliveredAt = optTime(last), optTime(deliveredAt)
	if d.Status == db.HookPending {
		d.NextAttemptAt = optTime(next)
	}
	return d, nil
}

// ClaimHookDeliveries leases due pending deliveries, oldest due first, at most
// c.PerWebhook-c.Busy of each webhook: the bound is the calling worker's, so each process
// keeps its own (N processes send one endpoint up to N times PerWebhook at once). Rows
// another process is claiming at this moment are passed over (SKIP LOCKED), not waited
// for. The work is bounded by what is claimed and the number of webhooks, not by the
// backlog.
func (s *Store) ClaimHookDeliveries(ctx context.Context, c db.HookClaim) ([]db.HookJob, error) {
	// The worker claims after every commit with events, most of which queue no delivery:
	// a read finds that out without a write transaction.
	var anyDue bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_deliveries
		WHERE status = 'pending' AND next_attempt_at <= $1 AND claimed_until <= $1)`, millis(s.Now())).Scan(&anyDue); err != nil {
		return nil, storageError(err)
	}
	if !anyDue {
		return nil, nil
	}
	token := newRowUUID()
	var jobs []db.HookJob
	err := s.write(ctx, func(w *wtx) error {
		jobs = nil
		ids, err := w.dueHookRows(c)
		if err != nil || len(ids) == 0 {
			return err
		}
		until := millis(w.now.Add(c.Lease))
		if _, err := w.exec("UPDATE webhook_deliveries SET claimed_until = $1, claim = $2 WHERE id = ANY($3)",
			until, token, ids); err != nil {
			return err
		}
		jobs, err = w.loadHookJobs(ids, token, time.UnixMilli(until))
		return err
	})
	return jobs, err
}

// dueHookRows chooses the rows to claim: of the enabled webhooks with a due delivery, the
// one due longest first, each webhook's due rows that are not leased, no more than its
// free slots, read from the front of its own queue (webhook_deliveries_pending).
func (w *wtx) dueHookRows(c db.HookClaim) ([]int64, error) {
	now := millis(w.now)
	rows, err := w.query(`SELECT w.id FROM webhooks w, LATERAL (SELECT d.next_attempt_at FROM webhook_deliveries d
			WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.claimed_until <= $1
			ORDER BY d.next_attempt_at, d.id LIMIT 1) first
		WHERE w.enabled AND first.next_attempt_at <= $1 ORDER BY first.next_attempt_at, w.id`, now)
	if err != nil {
		return nil, err
	}
	hooks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, h := range hooks {
		room := c.Room(h, len(ids))
		if room <= 0 {
			continue
		}
		rows, err := w.query(`SELECT id FROM webhook_deliveries WHERE webhook_id = $1 AND status = 'pending'
			AND next_attempt_at <= $2 AND claimed_until <= $2 ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED`, h, now, room)
		if err != nil {
			return nil, err
		}
		some, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, err
		}
		ids = append(ids, some...)
	}
	return ids, nil
}

// loadHookJobs reads the claimed rows with their webhooks and events.
func (w *wtx) loadHookJobs(ids []int64, token string, leaseEnds time.Time) ([]db.HookJob, error) {
	rows, err := w.query("SELECT d.id, d.attempt, d.created_at, d.event_seq, "+db.WebhookColumns+
		" FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE d.id = ANY($1) ORDER BY d.id", ids)
	if err != nil {
		return nil, err
	}
	jobs, err := db.ScanRows(rows, func(r db.RowScanner) (db.HookJob, error) { return db.ScanHookJob(r, token, leaseEnds) })
	rows.Close()
	if err != nil {
		return nil, err
	}
	events, err := eventsBySeq(w.ctx, w.q(), db.HookJobSeqs(jobs))
	if err != nil {
		return nil, err
	}
	db.AttachHookEvents(jobs, events)
	return jobs, nil
}

// FinishHookDeliveries records attempts, each when the lease that made it still holds,
// in one write and one round trip.
func (s *Store) FinishHookDeliveries(ctx context.Context, done []db.HookAttempt) ([]bool, error) {
	kept := make([]bool, len(done))
	err := s.write(ctx, func(w *wtx) error {
		b := &pgx.Batch{}
		for i, a := range done {
			b.Queue(`UPDATE webhook_deliveries SET attempt = attempt + 1, status = $1, response_status = $2, error = $3,
				last_attempt_at = $4, next_attempt_at = $5, delivered_at = $6, claimed_until = 0, claim = NULL WHERE id = $7 AND claim = $8`,
				outcomeArgs(a)...).Exec(func(tag pgconn.CommandTag) error {
				kept[i] = tag.RowsAffected() == 1
				return nil
			})
		}
		return w.send(b)
	})
	if err != nil {
		return nil, err
	}
	return kept, nil
}

// outcomeArgs are the arguments of FinishHookDeliveries' statement for one attempt.
func outcomeArgs(a db.HookAttempt) []any {
	o := a.Outcome
	var status *int
	if o.ResponseStatus != 0 {
		status = &o.ResponseStatus
	}
	var next, delivered *int64
	switch o.Status {
	case db.HookPending:
		ms := millis(o.Next)
		next = &ms
	case db.HookDelivered:
		ms := millis(o.At)
		delivered = &ms
	}
	return []any{o.Status, status, nullString(o.Error), millis(o.At), next, delivered, a.Job.Row, a.Job.Claim}
}

// ReleaseHookDelivery ends the lease of a claimed delivery, when it is still j's.
func (s *Store) ReleaseHookDelivery(ctx context.Context, j db.HookJob) error {
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec("UPDATE webhook_deliveries SET claimed_until = 0, claim = NULL WHERE id = $1 AND claim = $2", j.Row, j.Claim)
		return err
	})
}

// OfferHookDeliveries offers nothing: every delivery is claimed, by whichever process
// sharing the database has room first.
func (s *Store) OfferHookDeliveries(db.HookTaker) (func(), bool) { return func() {}, false }

// NextHookDue reports when the earliest pending delivery of an enabled webhook can be
// claimed: when it is due, or when its lease ends.
func (s *Store) NextHookDue(ctx context.Context) (time.Time, bool, error) {
	var at *int64
	err := s.pool.QueryRow(ctx, `SELECT MIN(GREATEST(d.next_attempt_at, d.claimed_until)) FROM webhook_deliveries d
		JOIN webhooks w ON w.id = d.webhook_id WHERE d.status = 'pending' AND w.enabled`).Scan(&at)
	if err != nil || at == nil {
		return time.Time{}, false, storageError(err)
	}
	return time.UnixMilli(*at).UTC(), true, nil
}

// HookBacklog counts the pending deliveries.
func (s *Store) HookBacklog(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").Scan(&n)
	return n, storageError(err)
}
