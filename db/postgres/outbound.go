package postgres

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// The outbound queue (db.Outbound), which every process's dispatcher and relay workers
// take from at once. SQLite's single process needs no claim: its one dispatcher reads the
// due rows, and a restart puts back whatever a worker held. Here each row a process takes
// carries a lease: the process's name (queueState.holder) in outbound.lease, and an
// expiry in leased_until.
//
//   - ClaimOutbound leases due ready rows with FOR UPDATE SKIP LOCKED, passing over rows
//     another live process holds; this process's own dispatcher may take its own rows
//     again (a row left for the next pass is taken at once, as with SQLite).
//   - RouteToRelay hands the rows to the relay queue unleased; ClaimRelay leases one to a
//     relay worker for relayLease, MarkHandoff renews that lease and succeeds only while
//     the row is still this process's, and every outcome (FinishOutbound) is recorded only
//     by the process whose lease the row carries: a process that lost its row to a
//     takeover neither sends the end-of-data dot nor records anything.
//   - A process that dies leaves its rows leased. Every session of a process carries its
//     name (application_name, set by Open), and the database drops a killed process's
//     sessions at once (a machine that vanishes from the network keeps them until the
//     server's TCP keepalive gives up: the lease bounds that wait); so a row whose holder
//     has no session left, or whose lease ended, is taken over by any other process's
//     ClaimOutbound as RecoverOutbound does at a start (a row attempting is made ready
//     again, a row handed off is recorded accepted, uncertain, and not sent again).
//     RecoverOutbound itself takes back this process's own rows too, never those of a
//     live process. A live process whose sessions are all lost for a moment may lose its
//     rows this way: it then records nothing for them (its hand-off and outcomes are
//     refused), so nothing is sent or stored twice.

// dispatchLease is how long a row a dispatcher claimed stays its own: a pass routes and
// records its batch in seconds.
const dispatchLease = 5 * time.Minute

// relayLease is how long a relay worker's row stays its own: longer than the longest
// relay conversation (a minute per command, five for the data and five for the final
// answer, mail/relay.go).
const relayLease = 30 * time.Minute

// queueState is what this process knows of the queues it takes from.
type queueState struct {
	holder string // this process's name on the rows it leases
	// relayProvider is what a takeover records as the provider of a dead process's rows
	// handed off to the relay (RecoverOutbound names it); until it is known, those rows
	// wait for a process that knows it.
	relayProvider *atomic.Pointer[string]
}

func newQueueState() queueState {
	return queueState{holder: newRowUUID(), relayProvider: new(atomic.Pointer[string])}
}

// name returns the process's name on its leases.
func (q *queueState) name() string { return q.holder }

// sessionPrefix starts the application_name of every session of an inboxd process; its
// name follows.
const sessionPrefix = "inboxd "

// sessionName is the application_name of this process's sessions.
func (q *queueState) sessionName() string { return sessionPrefix + q.holder }

// liveHolders returns the names of the processes with a session on the database now. It
// returns nil (NULL: no row passes "lease <> ALL(live)", only leases decide) when the
// sessions do not show their names, as behind a pooler that does not pass
// application_name on: then the session this very query runs on lacks its own.
func (w *wtx) liveHolders(self string) ([]string, error) {
	var live []string
	var selfShown bool
	err := w.queryRow(`SELECT COALESCE(array_agg(DISTINCT substr(application_name, length($1) + 1)), '{}'),
		COALESCE(bool_or(pid = pg_backend_pid() AND application_name = $1 || $2), false)
		FROM pg_stat_activity WHERE starts_with(application_name, $1)`, sessionPrefix, self).Scan(&live, &selfShown)
	if err != nil || !selfShown {
		return nil, err
	}
	return live, nil
}

// Suppressions returns the suppression list of an inbox, oldest first.
func (s *Store) Suppressions(ctx context.Context, inboxID int64) ([]db.Suppression, error) {
	rows, err := s.pool.Query(ctx, `SELECT address, reason, smtp_code, smtp_enhanced, created_at FROM suppressions
		WHERE inbox_id = $1 ORDER BY created_at, address`, inboxID)
	out, err := collect(rows, err, func(r pgx.CollectableRow) (db.Suppression, error) {
		var x db.Suppression
		var created int64
		err := r.Scan(&x.Address, &x.Reason, &x.SMTPCode, &x.SMTPEnhanced, &created)
		x.CreatedAt = fromMillis(created).Time
		return x, err
	})
	return out, storageError(err)
}

// ClaimOutbound leases up to limit due ready rows to this process (its own again, and
// those of dead processes), after taking over the relay rows of dead processes. Jobs
// carry no Raw bytes (MessageRaw reads them one message at a time).
func (s *Store) ClaimOutbound(ctx context.Context, limit int) ([]db.OutboundJob, error) {
	// The dispatcher of every process looks every second: a read tells whether there is
	// anything to claim or take over, without a write transaction.
	var work bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM outbound WHERE state = $1 AND next_at <= $2)
		OR EXISTS (SELECT 1 FROM outbound WHERE state IN ($3, $4) AND lease <> $5)`,
		db.OutboundReady, millis(s.Now()), db.OutboundAttempting, db.OutboundHandoff, s.queues.name()).Scan(&work); err != nil || !work {
		return nil, storageError(err)
	}
	var jobs []db.OutboundJob
	err := s.write(ctx, func(w *wtx) error {
		live, err := w.liveHolders(s.queues.name())
		if err != nil {
			return err
		}
		if _, err := s.takeBack(w, takeOver, live, s.queues.relayProvider.Load()); err != nil {
			return err
		}
		rows, err := w.query(`WITH due AS (
				SELECT id FROM outbound WHERE state = 'ready' AND next_at <= $1
				AND (leased_until <= $1 OR lease = $2 OR lease <> ALL($5))
				ORDER BY next_at, id LIMIT $3 FOR UPDATE SKIP LOCKED),
			leased AS (UPDATE outbound o SET leased_until = $4, lease = $2 FROM due WHERE o.id = due.id
				RETURNING o.id, o.message_id, o.recipient, o.attempts, o.created_at, o.next_at)
			SELECT l.id, l.message_id, m.inbox_id, m.message_id, l.recipient, l.attempts, m.from_addr, l.created_at
			FROM leased l JOIN messages m ON m.id = l.message_id ORDER BY l.next_at, l.id`,
			millis(w.now), s.queues.name(), limit, millis(w.now.Add(dispatchLease)), live)
		if err != nil {
			return err
		}
		jobs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.OutboundJob, error) {
			var j db.OutboundJob
			var created int64
			err := r.Scan(&j.ID, &j.MessageRow, &j.InboxID, &j.MessageID, &j.Recipient, &j.Attempts, &j.From, &created)
			j.CreatedAt = fromMillis(created).Time
			return j, err
		})
		return err
	})
	return jobs, err
}

// FinishOutbound records the outcome of a delivery attempt.
func (s *Store) FinishOutbound(ctx context.Context, job db.OutboundJob, o db.OutboundOutcome) error {
	return s.FinishOutboundBatch(ctx, []db.OutboundJob{job}, []db.OutboundOutcome{o})
}

// FinishOutboundBatch records the outcomes of several attempts in one transaction (a group
// commit for local and sink deliveries); outcomes[i] belongs to jobs[i]. The delivery
// record's version grows with every change, and a final answer is never replaced.
func (s *Store) FinishOutboundBatch(ctx context.Context, jobs []db.OutboundJob, outcomes []db.OutboundOutcome) error {
	if len(jobs) != len(outcomes) {
		return errors.New("db: FinishOutboundBatch: one outcome per job")
	}
	if len(jobs) == 0 {
		return nil
	}
	local := make([]*prepared, len(outcomes))
	for i, o := range outcomes {
		if o.Local != nil {
			local[i] = prepare(o.Local)
		}
	}
	return s.write(ctx, func(w *wtx) error {
		for i := range jobs {
			if err := s.finishOutbound(w, jobs[i], outcomes[i], local[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// finishOutbound records one outcome, when the row is still this process's (it may have
// been deleted with its inbox, finished already, or taken over after this process's lease
// ended: then the outcome is another's to record).
func (s *Store) finishOutbound(w *wtx, job db.OutboundJob, o db.OutboundOutcome, local *prepared) error {
	var one int
	err := w.queryRow("SELECT 1 FROM outbound WHERE id = $1 AND lease = $2 FOR UPDATE", job.ID, s.queues.name()).Scan(&one)
	if noRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if local != nil {
		if o, err = w.storeLocal(local, o); err != nil {
			return err
		}
	}
	if o.Update.Status != "" {
		if err := w.updateRecipient(job.MessageRow, job.Recipient, o.Update); err != nil {
			return err
		}
	}
	if o.Update.Status == db.RecipientBounced {
		// API-NOTES section 4: a sent message with a bounced recipient carries `bounced`.
		if err := w.applyLabels([]string{db.LabelBounced}, nil, "m.id = $1", job.MessageRow); err != nil {
			return err
		}
	}
	if o.Suppress {
		if err := w.suppress(job.InboxID, job.Recipient, o.Update); err != nil {
			return err
		}
	}
	switch {
	case o.Park:
		_, err = w.exec(`UPDATE outbound SET state = $1, state_at = $2, attempts = attempts + 1, leased_until = 0, lease = NULL
			WHERE id = $3`, db.OutboundParked, millis(w.now), job.ID)
	case db.Terminal(o.Update.Status) || o.Settled:
		_, err = w.exec("DELETE FROM outbound WHERE id = $1", job.ID)
	case o.RetryAt != nil:
		// A relay attempt retries on the relay; anything else is routed again.
		_, err = w.exec(`UPDATE outbound SET state = CASE WHEN state IN ($1, $2) THEN $3 ELSE $4 END,
			state_at = $5, attempts = attempts + 1, next_at = $6, leased_until = 0, lease = NULL WHERE id = $7`,
			db.OutboundAttempting, db.OutboundHandoff, db.OutboundRelay, db.OutboundReady, millis(w.now), millis(*o.RetryAt), job.ID)
	default:
		err = errors.New("db: outbound outcome decides nothing")
	}
	return err
}

// storeLocal stores a local delivery's copy by the rules of db.StoreLocal, at the
// message's own time (its events and billing period are the delivery's), and returns the
// outcome to record.
func (w *wtx) storeLocal(p *prepared, o db.OutboundOutcome) (db.OutboundOutcome, error) {
	now := w.now
	w.now = p.m.Timestamp
	o, err := db.StoreLocal(&unit{w}, p, o)
	w.now = now
	return o, err
}

// updateRecipient sets one recipient's state in a sent message's delivery record and
// records the events of the change. The message row is locked first: two processes
// finishing two recipients of one message at once must not each write a record that
// lacks the other's change.
func (w *wtx) updateRecipient(messageRow int64, recipient string, u db.RecipientDelivery) error {
	var raw *string
	if err := w.queryRow("SELECT delivery FROM messages WHERE id = $1 FOR NO KEY UPDATE", messageRow).Scan(&raw); err != nil {
		return err
	}
	var d db.Delivery
	if err := parseJSON(raw, &d); err != nil {
		return err
	}
	if !d.SetRecipient(recipient, u, w.now) {
		return nil
	}
	if _, err := w.exec("UPDATE messages SET delivery = $1 WHERE id = $2", jsonText(&d), messageRow); err != nil {
		return err
	}
	var bounced []string
	if u.Status == db.RecipientBounced {
		bounced = []string{recipient}
	}
	return db.DeliveryChanged(&unit{w}, messageRow, &d, bounced)
}

// suppress puts an address on an inbox's suppression list; an address already there keeps
// its first reason.
func (w *wtx) suppress(inboxID int64, address string, u db.RecipientDelivery) error {
	reason := u.Reason
	if reason == "" {
		reason = "hard bounce"
	}
	_, err := w.exec(`INSERT INTO suppressions(inbox_id, address, reason, smtp_code, smtp_enhanced, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, inboxID, address, reason, u.SMTPStatusCode, u.SMTPEnhancedStatusCode, millis(w.now))
	return err
}

// RouteToRelay hands ready rows this process claimed to the relay workers of any process
// (ClaimRelay), unleased.
func (s *Store) RouteToRelay(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`UPDATE outbound SET state = $1, state_at = $2, leased_until = 0, lease = NULL
			WHERE state = $3 AND id = ANY($4) AND lease = $5`, db.OutboundRelay, millis(w.now), db.OutboundReady, ids, s.queues.name())
		return err
	})
}

// ClaimRelay leases the relay row that is due first to the calling worker (state
// attempting), with its Raw bytes; nil when none is due. SKIP LOCKED passes over a row
// another worker is claiming at this moment instead of waiting for it.
func (s *Store) ClaimRelay(ctx context.Context) (*db.OutboundJob, error) {
	var job *db.OutboundJob
	err := s.write(ctx, func(w *wtx) error {
		job = nil
		var j db.OutboundJob
		var created int64
		err := w.queryRow(`WITH claimed AS (UPDATE outbound SET state = $1, state_at = $2, leased_until = $3, lease = $4 WHERE id =
				(SELECT id FROM outbound WHERE state = $5 AND next_at <= $2 ORDER BY next_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
				RETURNING id, message_id, recipient, attempts, created_at)
			SELECT c.id, c.message_id, m.inbox_id, m.message_id, c.recipient, c.attempts, m.from_addr, c.created_at
			FROM claimed c JOIN messages m ON m.id = c.message_id`,
			db.OutboundAttempting, millis(w.now), millis(w.now.Add(relayLease)), s.queues.name(), db.OutboundRelay).
			Scan(&j.ID, &j.MessageRow, &j.InboxID, &j.MessageID, &j.Recipient, &j.Attempts, &j.From, &created)
		if noRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if j.Raw, err = rawOf(w.ctx, w.q(), j.MessageRow); err != nil {
			return err
		}
		j.CreatedAt = fromMillis(created).Time
		job = &j
		return nil
	})
	return job, err
}

// MarkHandoff records, before the end-of-data dot goes to the relay, that the relay may
// accept the message from now on, and renews the row's lease for the relay's answer. It
// reports false when the row is no longer this worker's (deleted with its inbox, or taken
// over by another process after the lease ended): the message must not be completed.
func (s *Store) MarkHandoff(ctx context.Context, jobID int64) (bool, error) {
	var ok bool
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec(`UPDATE outbound SET state = $1, state_at = $2, leased_until = $3 WHERE id = $4 AND state = $5 AND lease = $6`,
			db.OutboundHandoff, millis(w.now), millis(w.now.Add(relayLease)), jobID, db.OutboundAttempting, s.queues.name())
		ok = err == nil && tag.RowsAffected() == 1
		return err
	})
	return ok, err
}

// RecoverOutbound runs once before this process's outbound worker starts. It takes back
// the rows this process held (a worker of this store stopped) and those of dead
// processes (no session left, or the lease ended), never a live process's: a row attempting, relay or
// parked is made ready, to be routed again under the current configuration; a row handed
// off (the relay may have the whole message) is recorded `accepted` with UncertainReason
// and dropped, so nothing is sent twice and the record says what is known.
func (s *Store) RecoverOutbound(ctx context.Context, provider string) (db.OutboundRecovery, error) {
	s.queues.relayProvider.Store(&provider)
	var out db.OutboundRecovery
	err := s.write(ctx, func(w *wtx) error {
		live, err := w.liveHolders(s.queues.name())
		if err != nil {
			return err
		}
		out, err = s.takeBack(w, recoverAtStart, live, &provider)
		return err
	})
	return out, err
}

// takeBackRows chooses the rows takeBack puts back: those in the states requeue lists
// (made ready) or handed off (recorded uncertain) that pass where, a condition with this
// process's name as $1, now as $2 and the names of the live processes as $3.
type takeBackRows struct {
	requeue []string
	where   string
}

var (
	// recoverAtStart is what RecoverOutbound takes back: this process's rows and the rows
	// whose lease ended, with the rows waiting for a relay worker or a transport, which
	// are routed again under the current configuration.
	recoverAtStart = takeBackRows{[]string{db.OutboundAttempting, db.OutboundRelay, db.OutboundParked},
		"lease = $1 OR leased_until <= $2 OR lease <> ALL($3)"}
	// takeOver is what every ClaimOutbound takes back: the relay attempts of dead
	// processes. This process's own stay its own until its next start: its worker may
	// still be talking to the relay.
	takeOver = takeBackRows{[]string{db.OutboundAttempting}, "lease <> $1 AND (leased_until <= $2 OR lease <> ALL($3))"}
)

// takeBack puts back the rows which chooses, as RecoverOutbound tells; handed-off rows
// only when provider is known.
func (s *Store) takeBack(w *wtx, which takeBackRows, live []string, provider *string) (db.OutboundRecovery, error) {
	var out db.OutboundRecovery
	tag, err := w.exec(`UPDATE outbound SET state = $4, state_at = $2, leased_until = 0, lease = NULL
		WHERE state = ANY($5) AND (`+which.where+`)`, s.queues.name(), millis(w.now), live, db.OutboundReady, which.requeue)
	if err != nil {
		return out, err
	}
	out.Requeued = int(tag.RowsAffected())
	if provider == nil {
		return out, nil
	}
	rows, err := w.query(`SELECT id, message_id, recipient FROM outbound WHERE state = $4 AND (`+which.where+`)
		ORDER BY id FOR UPDATE SKIP LOCKED`, s.queues.name(), millis(w.now), live, db.OutboundHandoff)
	if err != nil {
		return out, err
	}
	type handed struct {
		id, message int64
		recipient   string
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (handed, error) {
		var h handed
		return h, r.Scan(&h.id, &h.message, &h.recipient)
	})
	if err != nil {
		return out, err
	}
	for _, h := range all {
		u := db.RecipientDelivery{Status: db.RecipientAccepted, Provider: *provider, Reason: db.UncertainReason}
		if err := w.updateRecipient(h.message, h.recipient, u); err != nil {
			return out, err
		}
		if _, err := w.exec("DELETE FROM outbound WHERE id = $1", h.id); err != nil {
			return out, err
		}
	}
	out.Uncertain = len(all)
	return out, nil
}

// OutboundCounts returns how many queue rows are in each state, every state named (a
// metric's series should not vanish when its count is zero).
func (s *Store) OutboundCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, "SELECT state, COUNT(*) FROM outbound GROUP BY state")
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	out := map[string]int{db.OutboundReady: 0, db.OutboundRelay: 0, db.OutboundAttempting: 0, db.OutboundHandoff: 0}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, storageError(err)
		}
		out[st] = n
	}
	return out, storageError(rows.Err())
}

// ParkedCount returns how many queue rows wait for a transport.
func (s *Store) ParkedCount(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM outbound WHERE state = 'parked'").Scan(&n)
	return n, storageError(err)
}
