package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/inboxd/inboxd/db"
)

// Units of work and their isolation.
//
// A unit runs at READ COMMITTED, and the rules that check before they act (db.Charge,
// the send rate limit, inbox, key and webhook limits) hold across processes because the
// Tx method each check reads through first locks the row that serializes the checkers
// (FOR NO KEY UPDATE, held to the commit, and each later statement sees what committed
// before it got the lock): the account row for the account's inbox, key and webhook limits
// (lockAccount), the inbox row for the send rate (lockInbox), and for billing the usage
// row the units are counted on (UsedUnits; a message's triage unit is checked and spent in
// one statement on it, late in the unit: queueTriageCharge). What must be unique is
// backed by a unique constraint (idempotency keys, Message-IDs of an inbox, addresses):
// when two processes race, the second fails on it, and the unit runs again and finds the
// first's row. Conflicts (a unique violation, a deadlock, a serialization failure) run the
// unit again, up to maxAttempts, as db.Units allows; so does a connection lost before the
// unit asked to commit (a restart, a failover: nothing of it committed).
//
// SERIALIZABLE with retries was the other choice. It would need no lock here, but under a
// stream of deliveries its predicate locks on the same index pages (every delivery to an
// inbox reads and inserts at the right edge of its message indexes) fail units that did
// not conflict in truth, and the appends to the logs serialize the end of every unit
// anyway (log.go). Explicit locks keep the retries to real conflicts, and name in one
// place what a rule's check depends on.

// maxAttempts bounds how often a unit of work runs when it keeps conflicting.
const maxAttempts = 12

// wtx is one run of a write transaction, and what it leaves to do after the commit.
type wtx struct {
	ctx context.Context
	tx  pgx.Tx
	now time.Time

	logLocked   bool            // holds the log lock (log.go)
	grouped     bool            // runs the units of a group (group.go)
	notified    map[string]bool // channels notified (log.go)
	locked      map[string]bool // rows locked by lockAccount and lockInbox
	fresh       map[int64]bool  // threads made by this transaction that no message has joined yet
	savepoints  int             // savepoints made, for their names
	threadLocks int             // threading locks taken (tx_messages.go)
	arrivals    *db.Arrivals    // the store's: the messages of the events appended (log.go)
	threadIDs   *idReserve      // the store's: rows for new threads (NewThread)
	conflict    bool            // a statement in a savepoint hit a conflict: run the unit again
	later       *pgx.Batch      // statements whose results nothing reads, not sent yet (sendLater)
	last        *pgx.Batch      // the tails of a group's deliveries, held back (deferLast)
	charges     []heldCharge    // their charges, held back to go ahead of them (deferLast)
	wantLast    bool            // the next round trip sends last first (deferLast)
	hooks       *prefetched     // the enabled webhooks appendEvent read with the event
	read        readMemo        // what the transaction read that none of its units changes
}

// readMemo is what a transaction read that its units ask again (each delivery of a group
// reads its inbox's account and the account's plan, group.go): asked again in the same
// transaction, it answers without a round trip. An account of an inbox never changes; a
// plan changes only through UpsertAccount, which forgets it. The units of a group run one
// after another in one transaction, so an answer read by an earlier unit is what the later
// one would have read had it run right after it.
type readMemo struct {
	inboxAccounts map[int64]string
	plans         map[string]string
	rowInbox      map[int64]int64         // the inbox of each message the transaction wrote
	retired       map[int64]bool          // whether an inbox is deleted, read with its lock (queueShareInbox)
	hooks         map[string][]db.Webhook // enabled webhooks, by account (forgotten when a unit changes one)
}

// forget drops what w read, after a savepoint's rollback undid writes it may reflect.
func (w *wtx) forget() { w.read = readMemo{} }

// remember records v as what reading k answers in memo m.
func remember[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// write runs fn in a write transaction at READ COMMITTED, committed when fn returns nil,
// and runs it again on a conflict (see above): fn must set its results afresh. It runs
// without the caller's cancellation, like the SQLite store's writes: once asked for, a
// write runs to its end, and its caller learns whether it committed.
func (s *Store) write(ctx context.Context, fn func(w *wtx) error) error {
	ctx = context.WithoutCancel(ctx)
	for attempt := 1; ; attempt++ {
		w := s.newWtx(ctx)
		err := s.writeOnce(w, fn)
		if err == nil {
			s.committed(w)
			return nil
		}
		if !retryable(w, err) || attempt == maxAttempts {
			return storageError(err)
		}
		time.Sleep(retryPause(attempt))
	}
}

// newWtx starts a run of a write transaction, at the store's now.
func (s *Store) newWtx(ctx context.Context) *wtx {
	return &wtx{ctx: ctx, now: s.Now(), arrivals: &s.arrivals, threadIDs: &s.threadIDs}
}

// committed does what w's commit leaves to this process.
func (s *Store) committed(w *wtx) {
	// The listener hears these too; this process need not wait for it.
	if w.notified[chanAuth] {
		s.cache.invalidate()
	}
	if w.notified[chanEvents] {
		s.events.Fire()
	}
	if w.notified[chanControls] {
		s.controls.Fire()
	}
}

// retryable reports whether the run w of a unit, failed with err, may run again (see
// above): nothing of it committed, and running it again may succeed.
func retryable(w *wtx, err error) bool {
	return conflict(err) || w.conflict || beginFailed(err) || lostBeforeCommit(err)
}

// writeOnce runs fn once in a transaction of its own.
func (s *Store) writeOnce(w *wtx, fn func(w *wtx) error) error {
	tx, err := s.pool.BeginTx(w.ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return errBegin{err}
	}
	w.tx = tx
	err = runUnit(w, fn)
	if err == nil {
		err = w.flushAll()
	}
	if err != nil {
		tx.Rollback(w.ctx)
		return err
	}
	if err := tx.Commit(w.ctx); err != nil {
		return errCommit{err}
	}
	return nil
}

// errCommit is a commit that failed. When the connection was lost during it, the
// transaction may have committed or not: the unit is not run again (it could then be
// done twice), and its caller is answered unavailable.
type errCommit struct{ err error }

func (e errCommit) Error() string { return e.err.Error() }
func (e errCommit) Unwrap() error { return e.err }

// lostBeforeCommit reports whether err is a connection lost (the database restarted or
// failed over) before the unit asked to commit: nothing of it can have committed, so it
// runs again, on a new connection.
func lostBeforeCommit(err error) bool {
	var c errCommit
	return !errors.As(err, &c) && unavailable(err) && !isServerRefusal(err)
}

// isServerRefusal reports whether err is the database refusing a statement on a live
// connection (a full disk, a lock timeout, a read-only server), which running the unit
// again at once would meet again.
func isServerRefusal(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && !strings.HasPrefix(pe.Code, "08") && pe.Code != "57P01" && pe.Code != "57P02"
}

// runUnit runs fn, turning a panic into its error, so a bug in a rule fails its request
// instead of leaving the transaction open.
func runUnit(w *wtx, fn func(w *wtx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("db: unit of work panicked: " + stringOf(r))
		}
	}()
	return fn(w)
}

func stringOf(v any) string {
	if err, ok := v.(error); ok {
		return err.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "non-string panic value"
}

// errBegin is a transaction that did not start: nothing of it ran, so it may start
// again when the failure was the connection's (a pooled connection the server closed).
type errBegin struct{ err error }

func (e errBegin) Error() string { return e.err.Error() }
func (e errBegin) Unwrap() error { return e.err }

func beginFailed(err error) bool {
	var b errBegin
	return errors.As(err, &b) && pgconn.SafeToRetry(b.err)
}

// retryPause is the pause before attempt+1: growing, with jitter so that two units that
// collided do not collide again.
func retryPause(attempt int) time.Duration {
	base := time.Duration(attempt) * 2 * time.Millisecond
	return base/2 + time.Duration(rand.Int64N(int64(base)))
}

// exec runs a statement of w, after those sent later (sendLater).
func (w *wtx) exec(sql string, args ...any) (pgconn.CommandTag, error) {
	if err := w.flush(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return w.tx.Exec(w.ctx, sql, args...)
}

// queryRow runs a query of one row of w, after the statements sent later (sendLater).
func (w *wtx) queryRow(sql string, args ...any) pgx.Row {
	if err := w.flush(); err != nil {
		return errRow{err}
	}
	return w.tx.QueryRow(w.ctx, sql, args...)
}

// errRow is a row whose query was not run: its Scan returns why.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// query runs a query of w, after the statements sent later (sendLater).
func (w *wtx) query(sql string, args ...any) (pgx.Rows, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	return w.tx.Query(w.ctx, sql, args...)
}

// q is w as a querier, for the functions that also read outside units of work.
func (w *wtx) q() querier { return unitQuerier{w} }

type unitQuerier struct{ w *wtx }

func (q unitQuerier) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return q.w.exec(sql, args...)
}

func (q unitQuerier) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	return q.w.query(sql, args...)
}

func (q unitQuerier) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	return q.w.queryRow(sql, args...)
}

// send runs the statements queued in b in one round trip, in order, with their callbacks,
// after those sent later (sendLater), and returns the first error. A round trip costs more
// than most statements of a unit, so the statements that depend on no answer go together.
func (w *wtx) send(b *pgx.Batch) error {
	var ahead []*pgx.QueuedQuery
	if w.wantLast {
		ahead = w.takeLast()
	}
	w.wantLast = false
	if w.later != nil {
		ahead, w.later = append(ahead, w.later.QueuedQueries...), nil
	}
	if ahead != nil {
		b = &pgx.Batch{QueuedQueries: append(ahead, b.QueuedQueries...)}
	}
	if b.Len() == 0 {
		return nil
	}
	return w.tx.SendBatch(w.ctx, b).Close()
}

// sendLater sends the statements of b (with no callbacks: nothing reads their results)
// in the unit's next round trip, ahead of its statements, or before the commit. The tail
// of a delivery, the log lock and the appends to the logs, goes so in the round trip of
// the unit's next appends, or of its commit: every unit queues on the log lock (log.go),
// and a round trip fewer between the lock and the commit is a shorter queue.
func (w *wtx) sendLater(b *pgx.Batch) {
	if w.later == nil {
		w.later = &pgx.Batch{}
	}
	w.later.QueuedQueries = append(w.later.QueuedQueries, b.QueuedQueries...)
}

// flush sends the statements sendLater holds back, if any.
func (w *wtx) flush() error {
	if w.later == nil && (!w.wantLast || (w.last == nil && w.charges == nil)) {
		return nil
	}
	return w.send(&pgx.Batch{})
}

// deferLast holds the statements of b (with no callbacks) back to the end of the group
// w runs, or until a statement needs them done (wantLast): the tail of a delivery in a
// group, its charge and its appends to the logs under the log lock. The group then takes
// its usage rows and the log lock in its last round trip, for that round trip and the
// commit, rather than from its first delivery's tail to its commit, through every
// delivery after it: units of other transactions queue on those locks (group.go). The
// tails keep the order of their units; what reads the rows they write sends them first:
// an eager append to a log (lockLogs) and a charge (UsedUnits, SpendUnit).
//
// The charges go first, ordered by account (and, within one, in the order of their units,
// which decides which message keeps its triage when the allowance runs out), then the
// rest: every group then takes its usage rows in one order, and all of them before the
// log lock, as a lone unit does (log.go); two groups, of this process or of another, do
// not deadlock on them.
func (w *wtx) deferLast(b *pgx.Batch) {
	if w.last == nil {
		w.last = &pgx.Batch{}
	}
	w.last.QueuedQueries = append(w.last.QueuedQueries, b.QueuedQueries...)
	w.wantLast = false // lockLogs asked for it, building b
}

// heldCharge is a charge of a delivery's tail, held back with it (deferLast).
type heldCharge struct {
	account string
	q       *pgx.QueuedQuery
}

// deferCharge holds back the charges of b, of account, with a delivery's tail (deferLast).
func (w *wtx) deferCharge(account string, b *pgx.Batch) {
	for _, q := range b.QueuedQueries {
		w.charges = append(w.charges, heldCharge{account, q})
	}
}

// takeLast takes what deferLast holds back, in the order it goes (see there).
func (w *wtx) takeLast() []*pgx.QueuedQuery {
	slices.SortStableFunc(w.charges, func(a, b heldCharge) int { return strings.Compare(a.account, b.account) })
	var out []*pgx.QueuedQuery
	for _, c := range w.charges {
		out = append(out, c.q)
	}
	if w.last != nil {
		out = append(out, w.last.QueuedQueries...)
	}
	w.charges, w.last = nil, nil
	return out
}

// flushAll sends every statement held back: before the commit, and at the end of a unit
// that runs in a savepoint of its own.
func (w *wtx) flushAll() error {
	w.wantLast = true
	return w.flush()
}

// lockAccount locks an account's row for the rest of the transaction: the unit is then
// the only one checking the account's limits and billing (see above). It does nothing for
// an account that does not exist.
func (w *wtx) lockAccount(accountID string) error {
	return w.lockRow("a:"+accountID, "SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE", accountID)
}

// lockInbox locks an inbox's row for the rest of the transaction: the unit is then the
// only one checking the inbox's send rate.
func (w *wtx) lockInbox(inboxID int64) error {
	return w.lockRow("i:"+strconv.FormatInt(inboxID, 10), "SELECT 1 FROM inboxes WHERE id = $1 FOR NO KEY UPDATE", inboxID)
}

// queueShareInbox queues in b the locking of an inbox's row against its deletion for the
// rest of the transaction, before a message is stored in it, and the reading of whether
// it is deleted already (InboxRetired answers from it); it returns what marks it held
// once b has run. Without the lock, a message committed into one of the inbox's threads
// while DeleteInbox runs (its statements each see the commits made before they start)
// would be left pointing at a thread DeleteInbox then deletes: a foreign key violation
// there; and one that waited for the lock would find the row retired, which only the
// read then shows. Deliveries to one inbox share the lock and do not wait for each other.
func (w *wtx) queueShareInbox(b *pgx.Batch, inboxID int64) (held func()) {
	id := strconv.FormatInt(inboxID, 10)
	key := "s:" + id
	if _, read := w.read.retired[inboxID]; read && (w.locked["i:"+id] || w.locked[key]) {
		return func() {} // this unit holds it, or the stronger lock, already, and read it
	}
	var retired bool
	b.Queue("SELECT retired_at IS NOT NULL FROM inboxes WHERE id = $1 FOR SHARE", inboxID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&retired)
	})
	return func() {
		w.markLocked(key)
		remember(&w.read.retired, inboxID, retired)
	}
}

func (w *wtx) lockRow(key, sql string, arg any) error {
	if w.locked[key] {
		return nil
	}
	var one int
	if err := w.queryRow(sql, arg).Scan(&one); err != nil && !noRows(err) {
		return err
	}
	w.markLocked(key)
	return nil
}

// markLocked records that w holds the lock named key, to the end of its transaction.
func (w *wtx) markLocked(key string) {
	if w.locked == nil {
		w.locked = map[string]bool{}
	}
	w.locked[key] = true
}

// isolated runs fn in a savepoint: when fn fails, what it wrote is undone (with the locks
// it took and the notifications it sent) and the transaction goes on. A conflict inside
// it still runs the whole unit again: the rule that isolated fn would otherwise take a
// race for a real failure.
func (w *wtx) isolated(fn func() error) error {
	ferr, err := w.inSavepoint(fn)
	if err != nil {
		return storageError(err)
	}
	if ferr != nil && conflict(ferr) {
		w.conflict = true
	}
	return storageError(ferr)
}

// inSavepoint runs fn in a savepoint, undoing what it wrote (with the locks it took and
// the notifications it sent) when it fails. It returns fn's error, and err when the
// transaction itself failed around it (its savepoint statements).
func (w *wtx) inSavepoint(fn func() error) (ferr, err error) {
	w.savepoints++
	name := "isolated_" + strconv.Itoa(w.savepoints)
	w.wantLast = true // what came before is not fn's
	if _, err := w.exec("SAVEPOINT " + name); err != nil {
		return nil, err
	}
	logLocked, notified, locked := w.logLocked, copyFlags(w.notified), copyFlags(w.locked)
	ferr = fn()
	if ferr == nil {
		ferr = w.flushAll() // what fn sent later is fn's: it fails fn, not the unit
	}
	if ferr != nil {
		w.later, w.last, w.charges, w.hooks = nil, nil, nil, nil // fn's, undone
		if _, err := w.exec("ROLLBACK TO SAVEPOINT " + name); err != nil {
			return ferr, err
		}
		w.logLocked, w.notified, w.locked = logLocked, notified, locked
		w.forget()
	}
	if _, err := w.exec("RELEASE SAVEPOINT " + name); err != nil {
		return ferr, err
	}
	return ferr, nil
}

func copyFlags(m map[string]bool) map[string]bool {
	if m == nil {
		return nil
	}
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Update runs a unit of work (db.Units) in one transaction, which it may share with
// concurrent units (group.go); fn may run more than once.
func (s *Store) Update(ctx context.Context, fn func(tx db.Tx) error) error {
	return s.update(ctx, func(w *wtx) error { return fn(&unit{w}) })
}

// unit is db.Tx over one run of a write transaction.
type unit struct{ *wtx }

func (u *unit) Now() time.Time { return u.now }

func (u *unit) Isolated(fn func() error) error { return u.isolated(fn) }
