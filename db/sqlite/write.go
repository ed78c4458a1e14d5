package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Writes share commits. A commit costs far more than the few rows of a send, a label
// change or a delivery (it writes every dirty page to the WAL whole, and the
// pages of the same index edges are dirtied again by the next write), so concurrent
// writes go through one committer: while it commits, later writes queue, and the next
// transaction takes all of them. Each write runs in a savepoint of its own, in arrival
// order, so it sees the writes before it exactly as it would after their commits, and one
// that fails is rolled back alone. A lone write commits at once, without a savepoint.
//
// A group first runs without savepoints: a savepoint makes SQLite copy each page a write
// modifies into its sub-journal before the change, and nearly every write succeeds. Only
// when one fails is the transaction rolled back and the group run again, each write in a
// savepoint of its own. So a write's fn may run twice: it must set its results, not add
// to what a previous run left (measured in BENCHMARKS.md, SMTP section, "Fifth session").
//
// Nothing is acknowledged early: write returns only after the commit that holds its
// changes, and if the transaction as a whole fails (disk full, I/O error: SQLite may then
// roll back the whole transaction), every write in it reports the failure.
//
// Writes arriving in a stream gather. When writes have been queuing faster than one per
// gatherWait, the committer, before starting a transaction, waits for the next one: up to
// twice the recent gap between arrivals for each, and gatherWait in all. A write on an
// idle store commits at once, so an idle server adds no latency. Under a stream of
// deliveries this is what makes groups at all: each one's preparation (parsed, scanned,
// compressed) takes longer than a commit, so without the wait nearly every delivery
// committed alone, writing its dozen dirty pages to the WAL by itself (~1.2 writes a
// commit, counted). Measured with scripts/smtpbench.sh (then with the SMTP session
// announcing its deliveries): the bytes written per message fell from 172 to 136 KB (138
// to 90 KB with triage off); the CPU per message moved within the noise.
//
// The wait also ends as soon as as many writes are queued as the store lately held at
// once (queued or committing: the most over the last crowdMemory groups). Writers that
// each wait for their write before sending the next (an SMTP session takes one message
// at a time, so do most API clients) number about that many, and once all of them are
// queued none can come before this commit: waiting on would add the wait to every one of
// them. With smtpbench's eight sessions, stopping there took the ingest rate from 0.79 to
// 0.94-0.96 of 36f6f2e's (whose SMTP sessions announced their deliveries to the store)
// at the same CPU per message (BENCHMARKS.md). The store decides from what it sees queue,
// so no caller has to steer it; at worst the wait adds gatherWait to a commit (while a
// burst of more writers than there are now is remembered). A lone client writing in a
// tight loop, each write waiting for the one before, is all the crowd there is, and
// never waits.

// maxGroupWrites bounds one transaction, so a burst cannot hold the lock for long.
const maxGroupWrites = 256

// defaultGatherWait bounds how long the committer waits for a stream's next write.
const defaultGatherWait = time.Millisecond

// crowdMemory is how many groups back the committer remembers how many writes the store
// held at once: a few dozen milliseconds of a stream, so it follows writers coming and
// going, and a one-off burst is soon forgotten.
const crowdMemory = 16

type writeJob struct {
	fn   func(tx *sql.Tx) error
	err  error
	done chan struct{}
}

type writeQueue struct {
	mu      sync.Mutex
	pending []*writeJob
	running bool
	arrived chan struct{} // signalled when a write queues

	// gatherWait bounds the wait for more writes (defaultGatherWait; the tests set it).
	gatherWait time.Duration
	last       time.Time     // when the latest write queued
	gap        time.Duration // the recent gap between writes queuing, smoothed

	// committing counts the writes of the transaction being committed; crowd is the most
	// writes queued or committing at once since the current group started, crowds the
	// crowd of each of the groups before it (a ring, next the oldest).
	committing int
	crowd      int
	crowds     [crowdMemory]int
	next       int
}

// arrive notes that a write queued at now; q.mu is held.
func (q *writeQueue) arrive(now time.Time) {
	if q.last.IsZero() {
		q.gap = q.gatherWait // the first write: no stream yet
	} else {
		// An average over the last few gaps: one quick pair of writes is not a stream,
		// and a pause of a few gatherWaits ends it.
		q.gap = (3*q.gap + now.Sub(q.last)) / 4
	}
	q.last = now
	q.crowd = max(q.crowd, len(q.pending)+q.committing)
	if q.arrived != nil {
		select {
		case q.arrived <- struct{}{}:
		default:
		}
	}
}

// write runs fn in a write transaction, possibly shared with other writes (see above). A
// storage condition the operator can fix (disk full, read-only file) becomes a transient
// client error; nothing of fn stays applied when it returns an error. fn gets ctx without
// its cancellation (noCancel), and its statements must use that: the driver answers a
// cancellation by interrupting the connection, which the writes sharing the transaction
// also use. So a write, once asked for, runs whether or not its caller has given up
// since. fn may run twice, the first run rolled back (see above): it must set its results
// afresh.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	quiet := noCancel(ctx)
	j := &writeJob{fn: func(tx *sql.Tx) error { return fn(quiet, tx) }, done: make(chan struct{})}
	q := &s.writes
	q.mu.Lock()
	q.pending = append(q.pending, j)
	q.arrive(time.Now())
	if !q.running {
		q.running = true
		go s.commitLoop()
	}
	q.mu.Unlock()
	// Not bounded by ctx: once queued the write may commit, and the caller must learn
	// whether it did. A transaction is bounded by busy_timeout and its statements.
	<-j.done
	return j.err
}

// commitLoop commits queued writes in groups until none is left.
func (s *Store) commitLoop() {
	q := &s.writes
	for {
		q.mu.Lock()
		q.gather()
		group := db.NextGroup(&q.pending, maxGroupWrites)
		q.running = len(group) > 0 // none left: the next write starts a committer
		q.startGroup(len(group))
		q.mu.Unlock()
		if len(group) == 0 {
			return
		}

		s.commitGroup(group)
		s.events.hooks.groupEnded()
		s.events.fireIfAppended()
		// Before the writers learn of their commit: one that writes again at once must not
		// count as committing and queued both.
		q.mu.Lock()
		q.committing = 0
		q.mu.Unlock()
		for _, j := range group {
			close(j.done)
		}
	}
}

// startGroup notes that a group of n writes starts to commit, and remembers the crowd of
// the group before it; q.mu is held.
func (q *writeQueue) startGroup(n int) {
	q.crowds[q.next] = q.crowd
	q.next = (q.next + 1) % crowdMemory
	q.committing = n
	q.crowd = len(q.pending) + n
}

// seen is the most writes the store held at once lately (see above); q.mu is held.
func (q *writeQueue) seen() int {
	most := q.crowd
	for _, c := range q.crowds {
		most = max(most, c)
	}
	return most
}

// gather waits for more writes while they arrive in a stream (see above): for each next
// one up to twice the recent gap, up to gatherWait in all, until a full group or as many
// writes as the store lately held at once are queued. q.mu is held, and released while
// waiting.
func (q *writeQueue) gather() {
	if len(q.pending) == 0 || q.gap >= q.gatherWait {
		return
	}
	if q.arrived == nil {
		q.arrived = make(chan struct{}, 1)
	}
	deadline := time.Now().Add(q.gatherWait)
	for len(q.pending) < min(maxGroupWrites, q.seen()) {
		wait := min(time.Until(deadline), 2*q.gap)
		if wait <= 0 || !q.await(wait) {
			return
		}
	}
}

// await waits up to d for a write to queue and reports whether one did. q.mu is held,
// and released while waiting.
func (q *writeQueue) await(d time.Duration) bool {
	q.mu.Unlock()
	defer q.mu.Lock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-q.arrived:
		return true
	case <-timer.C:
		return false
	}
}

// commitGroup runs the writes of group in one transaction and sets each one's error.
func (s *Store) commitGroup(group []*writeJob) {
	ctx := context.Background()
	fail := func(err error) {
		for _, j := range group {
			if j.err == nil {
				j.err = storageError(err)
			}
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(err)
		return
	}
	s.events.hooks.groupStarted(ctx, tx)
	if len(group) == 1 {
		if err := runWrite(group[0].fn, tx); err != nil {
			tx.Rollback()
			group[0].err = storageError(err)
			return
		}
		if err := tx.Commit(); err != nil {
			fail(err)
		}
		return
	}
	if runAll(group, tx) {
		if err := tx.Commit(); err != nil {
			fail(err)
		}
		return
	}
	// One of them failed: undo them all and run each in a savepoint of its own.
	tx.Rollback()
	if tx, err = s.w.BeginTx(ctx, nil); err != nil {
		fail(err)
		return
	}
	s.events.hooks.groupStarted(ctx, tx)
	for _, j := range group {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT write"); err != nil {
			tx.Rollback()
			fail(err)
			return
		}
		if err := runWrite(j.fn, tx); err != nil {
			j.err = storageError(err)
			// If SQLite rolled the whole transaction back (it may, on a full disk or
			// an I/O error), the savepoint is gone and so are the writes before it.
			// Then every write of the group failed for the reason this one did.
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO write"); rerr != nil {
				tx.Rollback()
				fail(err)
				return
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE write"); err != nil {
			tx.Rollback()
			fail(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		fail(err)
	}
}

// runAll runs the writes of group one after another in tx, without savepoints, and
// reports whether every one succeeded; it stops at the first that fails.
func runAll(group []*writeJob, tx *sql.Tx) bool {
	for _, j := range group {
		if runWrite(j.fn, tx) != nil {
			return false
		}
	}
	return true
}

// runWrite runs fn, turning a panic into its error: fn runs on the committer goroutine,
// where a panic would otherwise take the whole server down with the writes around it.
func runWrite(fn func(tx *sql.Tx) error, tx *sql.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("db: write panicked: %v", r)
		}
	}()
	return fn(tx)
}
