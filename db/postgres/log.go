package postgres

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// The two logs that readers follow by seq: the event log (events: webhooks, streams,
// waits) and the change log of the search indexes (index_queue). A reader that has
// everything through seq N asks for what comes after N, so no append may become visible
// with a seq below one a reader has already passed.
//
// SQLite gets that from its one writer. Here concurrent transactions take sequence values
// in the order they ask and commit in another order, so seq alone is not commit order: a
// transaction holding seq 5 may commit after the one holding 6, and a reader at 6 would
// never see 5. Every append therefore first takes one transaction-level advisory lock
// (logLock) and holds it until its transaction ends: the appends of concurrent
// transactions take their seqs one transaction after another, each after the previous
// one's commit is visible (PostgreSQL releases a transaction's locks after its commit is
// visible). The lock is taken at the first append, which comes late in a unit of work
// (after the message rows), so it is held for the end of the unit and its commit; other
// writes of the unit run concurrently. One lock for both logs, so no two appenders can
// deadlock between them; and every unit takes it after the row locks it takes (a thread,
// an inbox, an account), never before one, so no lone unit waits for a row while holding it
// (the units of a group commit may: group.go says why that is safe). The alternative, a
// commit-ordered cursor from transaction ids (pg_current_xact_id, pg_snapshot_xmin), would let appends run concurrently but needs a
// cursor of two numbers in every reader and holds readers back behind any long
// transaction; the lock keeps seq a single number that means what it means in SQLite.
//
// log_heads.last records the newest seq committed to each log (a sequence's value also
// counts appends rolled back, which a reader waiting to catch up would wait for forever).

// logLock is the advisory lock key of the appends to the logs.
const logLock int64 = 0x696e626f78640002 // "inboxd" 2

// Channels other processes' commits are announced on, with NOTIFY in the transaction of
// the change: PostgreSQL delivers a notification once its transaction commits, to every
// session listening, this process's own listener included.
const chanEvents = "inboxd_events" // events were appended

// lockLogs queues, first in b, the taking of the log lock for the rest of w's
// transaction, unless w holds it already. It counts as held once b has run without error
// (a failed batch fails the unit).
func (w *wtx) lockLogs(b *pgx.Batch) {
	w.wantLast = true // appends held back go first (deferLast)
	if !w.logLocked {
		b.Queue("SELECT pg_advisory_xact_lock($1)", logLock)
		if w.grouped {
			b.Queue("SELECT set_config('lock_timeout', $1, true)", groupLockTimeout)
		}
		w.logLocked = true
	}
}

// enqueueIndex queues the messages matched by where (a condition on messages m, its
// arguments from $1) for the search indexes. Call it in the transaction that changes
// them: a new message, a label change (trash and quarantine hide a message from search),
// a triage result, a release from quarantine.
func (w *wtx) enqueueIndex(where string, args ...any) error {
	b := &pgx.Batch{}
	w.queueIndex(b, where, args...)
	return w.send(b)
}

// queueIndex queues in b what enqueueIndex does.
func (w *wtx) queueIndex(b *pgx.Batch, where string, args ...any) {
	w.queueChanges(b, "SELECT m.id, m.inbox_id, m.ts FROM messages m WHERE "+where, args...)
}

// enqueueInboxDrop queues the removal of every message of a deleted inbox from the
// indexes.
func (w *wtx) enqueueInboxDrop(inboxID int64) error {
	b := &pgx.Batch{}
	w.queueChanges(b, "SELECT NULL::bigint, $1::bigint, 0::bigint", inboxID)
	return w.send(b)
}

// queueChanges queues in b the appending of the (message, inbox, ts) rows of query to
// the change log, which moves its head, under the log lock.
func (w *wtx) queueChanges(b *pgx.Batch, query string, args ...any) {
	w.lockLogs(b)
	b.Queue(`WITH ins AS (INSERT INTO index_queue(message, inbox, ts) `+query+` RETURNING seq)
		UPDATE log_heads SET last = s.seq FROM (SELECT MAX(seq) AS seq FROM ins) s
		WHERE log_heads.name = 'index_queue' AND s.seq IS NOT NULL`, args...)
}

// appendEvent appends e to the event log, moves its head and announces it to every
// process once w commits.
func (w *wtx) appendEvent(e db.NewEvent) (db.AppendedEvent, error) {
	detail, err := db.EventDetail(e)
	if err != nil {
		return db.AppendedEvent{}, err
	}
	var a db.AppendedEvent
	id := newRowUUID()
	b := &pgx.Batch{}
	w.lockLogs(b)
	deferred, canDefer := w.deferrableEvent(e)
	ins := b.Queue(`WITH ins AS (
			INSERT INTO events(event_id, account_id, inbox_id, type, occurred_at, message_row, message_id, thread_id, detail)
			SELECT $1, i.account_id, m.inbox_id, $2, $3, m.id, m.message_id, t.uuid, $4
			FROM messages m JOIN inboxes i ON i.id = m.inbox_id JOIN threads t ON t.id = m.thread_id WHERE m.id = $5
			RETURNING seq, account_id, inbox_id),
		head AS (UPDATE log_heads SET last = (SELECT seq FROM ins) WHERE name = 'events' AND EXISTS (SELECT 1 FROM ins))
		SELECT seq, account_id, inbox_id FROM ins`,
		id, e.Type, millis(e.OccurredAt), detail, e.MessageRow)
	w.queueNotify(b, chanEvents)
	if canDefer {
		w.deferLast(b)
		w.arrivals.Put(id, e.Message)
		return deferred, nil
	}
	ins.QueryRow(func(row pgx.Row) error {
		return row.Scan(&a.Seq, &a.AccountID, &a.InboxRow)
	})
	hooks := w.queueEnabledWebhooks(b, e.MessageRow)
	if err := w.send(b); err != nil {
		return db.AppendedEvent{}, err
	}
	w.hooks = &prefetched{accountID: a.AccountID, hooks: *hooks}
	remember(&w.read.hooks, a.AccountID, *hooks)
	w.arrivals.Put(id, e.Message)
	return a, nil
}

// deferrableEvent reports whether the append of e may wait for the end of w's group
// (deferLast), and what it then answers: when e is of a message w wrote, whose account's
// enabled webhooks w has read and found none, nothing reads its seq (db.RecordEvent needs
// it only to queue deliveries to webhooks), and its account and inbox are known.
func (w *wtx) deferrableEvent(e db.NewEvent) (db.AppendedEvent, bool) {
	if !w.grouped {
		return db.AppendedEvent{}, false
	}
	inbox, ok := w.read.rowInbox[e.MessageRow]
	if !ok {
		return db.AppendedEvent{}, false
	}
	account, ok := w.read.inboxAccounts[inbox]
	if !ok {
		return db.AppendedEvent{}, false
	}
	hooks, ok := w.read.hooks[account]
	if !ok || len(hooks) > 0 {
		return db.AppendedEvent{}, false
	}
	return db.AppendedEvent{AccountID: account, InboxRow: inbox}, true
}

// notify sends a notification on channel when w commits, once per transaction.
func (w *wtx) notify(channel string) error {
	b := &pgx.Batch{}
	w.queueNotify(b, channel)
	return w.send(b)
}

// queueNotify queues in b the notification on channel that w sends when it commits,
// unless w sends it already.
func (w *wtx) queueNotify(b *pgx.Batch, channel string) {
	if w.notified[channel] {
		return
	}
	b.Queue("SELECT pg_notify($1, '')", channel)
	if w.notified == nil {
		w.notified = map[string]bool{}
	}
	w.notified[channel] = true
}

// newRowUUID returns the UUID of a new row: version 7, whose leading timestamp makes
// each insert land at the end of its unique index.
func newRowUUID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// EventsCommitted returns a channel closed once events are committed after the call, by
// this process or another (the listener hears their notifications).
func (s *Store) EventsCommitted() <-chan struct{} { return s.events.Wait() }

// listener holds a connection of its own that LISTENs for the notifications of every
// process's commits and calls the function of each channel. A connection lost is made
// again; every function is called then too, since notifications sent meanwhile are lost
// (a waiter must look for itself, a cache must forget).
type listener struct {
	// lost is called when the connection is lost: the database restarted or failed over,
	// most likely, and the pool's idle connections are as dead as this one. The store
	// resets its pool then, so that the requests that follow get new connections instead
	// of each meeting a dead one and answering unavailable.
	lost   func()
	cancel context.CancelFunc
	done   chan struct{}
}

// listenRetry is how long the listener waits before connecting again.
const listenRetry = 200 * time.Millisecond

// start connects and listens on the channels of on, then goes on in the background
// until stop.
func (l *listener) start(ctx context.Context, cfg *pgx.ConnConfig, on map[string]func()) error {
	conn, err := listen(ctx, cfg, on)
	if err != nil {
		return storageError(err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(lctx, cfg, conn, on)
	return nil
}

// listen opens a connection that listens on the channels of on.
func listen(ctx context.Context, cfg *pgx.ConnConfig, on map[string]func()) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, err
	}
	for channel := range on {
		if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
			conn.Close(ctx)
			return nil, err
		}
	}
	return conn, nil
}

func (l *listener) run(ctx context.Context, cfg *pgx.ConnConfig, conn *pgx.Conn, on map[string]func()) {
	defer close(l.done)
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				if ctx.Err() == nil && l.lost != nil {
					l.lost()
				}
				break
			}
			if f := on[n.Channel]; f != nil {
				f()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(listenRetry):
		}
		if c, err := listen(ctx, cfg, on); err == nil {
			conn = c
			for _, f := range on {
				f()
			}
		}
	}
}

// stop ends the listener and waits for it.
func (l *listener) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}
