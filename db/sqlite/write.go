package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
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
// Writes that are on their way gather. A caller about to prepare a write (a delivery
// being parsed, scanned and compressed) announces it with Expect, and the committer,
// before starting a transaction, waits up to gatherWait for the announced writes to queue
// behind the ones it has. A lone write with none announced commits at once, so an idle
// server adds no latency. Under a stream of deliveries this is what makes groups at all:
// each one's preparation takes longer than a commit, so without the wait nearly every
// delivery committed alone, writing its dozen dirty pages to the WAL by itself (~1.2
// writes a commit, counted). Measured with scripts/smtpbench.sh, announcing from the
// SMTP DATA command on: the bytes written per message fell from 172 to 136 KB (138 to 90
// KB with triage off); the CPU per message moved within the noise. A slow client keeps
// its announcement open while it sends, so the wait is bounded: at worst it adds
// gatherWait to a commit.

// maxGroupWrites bounds one transaction, so a burst cannot hold the lock for long.
const maxGroupWrites = 256

// gatherWait bounds how long the committer waits for announced writes (a variable for
// the tests).
var gatherWait = time.Millisecond

type writeJob struct {
	fn   func(tx *sql.Tx) error
	err  error
	done chan struct{}
}

type writeQueue struct {
	mu       sync.Mutex
	pending  []*writeJob
	running  bool
	expected int           // announced writes not yet queued (Expect)
	arrived  chan struct{} // signalled when a write queues or an announcement ends
}

// expectKey is the context key of an announced write (Expect).
type expectKey struct{}

// expectation is one announced write: it counts in writeQueue.expected until the write
// queues or the caller gives it up, whichever comes first.
type expectation struct{ open bool }

// Expect announces that the caller will soon write through the returned context (a
// delivery it is still preparing), so that the committer waits a moment for it (see
// above). The returned func ends the announcement if the write has not queued by then;
// call it when the caller is done, whatever happened. An announcement ends at the first
// write through the context.
func (s *Store) Expect(ctx context.Context) (context.Context, func()) {
	e := &expectation{open: true}
	q := &s.writes
	q.mu.Lock()
	q.expected++
	q.mu.Unlock()
	return context.WithValue(ctx, expectKey{}, e), func() {
		q.mu.Lock()
		q.settle(e)
		q.mu.Unlock()
	}
}

// settle ends announcement e if it is still open; q.mu is held.
func (q *writeQueue) settle(e *expectation) {
	if e == nil || !e.open {
		return
	}
	e.open = false
	q.expected--
	q.signal()
}

// signal wakes a committer waiting for writes to gather; q.mu is held.
func (q *writeQueue) signal() {
	if q.arrived == nil {
		return
	}
	select {
	case q.arrived <- struct{}{}:
	default:
	}
}

// write runs fn in a write transaction, possibly shared with other writes (see above). A
// storage condition the operator can fix (disk full, read-only file) becomes a transient
// client error; nothing of fn stays applied when it returns an error. The statements of fn
// must use a context without cancellation (noCancel): the driver answers a cancellation by
// interrupting the connection, which the writes sharing the transaction also use. fn may
// run twice, the first run rolled back (see above): it must set its results afresh.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	j := &writeJob{fn: fn, done: make(chan struct{})}
	q := &s.writes
	e, _ := ctx.Value(expectKey{}).(*expectation)
	q.mu.Lock()
	q.pending = append(q.pending, j)
	q.settle(e)
	q.signal()
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
		n := min(len(q.pending), maxGroupWrites)
		if n == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		group := make([]*writeJob, n)
		copy(group, q.pending)
		rest := copy(q.pending, q.pending[n:])
		clear(q.pending[rest:])
		q.pending = q.pending[:rest]
		q.mu.Unlock()

		s.commitGroup(group)
		for _, j := range group {
			close(j.done)
		}
	}
}

// gather waits, up to gatherWait, until the writes announced when it starts have queued
// or ended their announcement, or a full group is queued. Writes announced meanwhile are
// not waited for. q.mu is held, and released while waiting.
func (q *writeQueue) gather() {
	most := min(len(q.pending)+q.expected, maxGroupWrites)
	if len(q.pending) == 0 || len(q.pending) >= most {
		return
	}
	if q.arrived == nil {
		q.arrived = make(chan struct{}, 1)
	}
	timer := time.NewTimer(gatherWait)
	defer timer.Stop()
	for len(q.pending) < min(most, len(q.pending)+q.expected) {
		q.mu.Unlock()
		select {
		case <-q.arrived:
			q.mu.Lock()
		case <-timer.C:
			q.mu.Lock()
			return
		}
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
