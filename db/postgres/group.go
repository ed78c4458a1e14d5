package postgres

import (
	"context"
	"sync"

	"github.com/inboxd/inboxd/db"
)

// Units of work share commits, as the SQLite store's writes do (db/sqlite/write.go).
//
// Under a stream of deliveries every unit of one account queues on the same rows (the
// usage row its triage unit is charged on, the log lock: unit.go, log.go), and each pays a
// transaction of its own: BEGIN and COMMIT round trips, the lock and its wake-up, the log
// lock, a NOTIFY, and the commit's work in PostgreSQL. So concurrent units of one process
// go through its committers (two, at most: committers): while they run transactions,
// later units queue, and the next transaction runs all of them one after another, with
// one commit, one log-lock hold and one notification. A lone unit runs on its own, at once.
//
// A group first runs without savepoints (a savepoint costs a statement and a
// subtransaction, and nearly every unit succeeds). When one fails, the transaction is
// rolled back and the group runs again, each unit in a savepoint of its own, so a unit
// that fails (a rule's refusal, say) is undone alone and reports its error, and the others
// commit as if it had not run. A unit that meets a conflict there (a deadlock, a unique
// violation: another process's commit) runs again on its own afterwards, with the
// retries of Store.write; so does every unit of a group whose connection was lost before
// it asked to commit. A unit's fn may thus run several times, as db.Units allows.
//
// Nothing is acknowledged early: Update returns only after the commit that holds its
// unit. When the commit itself fails every unit of the group answers unavailable, as a
// lone unit's failed commit does (it may have committed: none is run again).
//
// Within a group a later unit may take row locks (a thread, the usage row of another
// account) after an earlier one took the log lock, against the order log.go keeps for
// lone units: it can then wait for a row whose holder, in another process, waits for the
// log lock. PostgreSQL would detect that deadlock only after deadlock_timeout (1 s by
// default), so a group, once it holds the log lock, waits for a lock at most
// groupLockTimeout: a wait that long while holding it is a deadlock, or near enough (a
// row is held by a unit between its lock and its own appends for a round trip or two).
// The group then rolls back, and the unit that waited runs again on its own, in the
// lock order of a lone unit.

// groupLockTimeout bounds a group's wait for a lock once it holds the log lock (above).
const groupLockTimeout = "50ms"

// committers is how many groups a process runs at once. A group runs its units one after
// another on one connection, each waiting for its round trips; on a busy machine each
// round trip also waits for a CPU, and with one committer the ingest was at times slower
// than lone units overlapping (BENCHMARKS.md, issue 30). With two, one group's round trips
// overlap the other's; they queue on each other only for their tails (deferLast: the
// charges, then the log lock, in their last round trip and commit). Whether two beat one
// is not settled by measurement yet: the runs on a busy machine were too noisy to say.
const committers = 2

// maxGroupUnits bounds one transaction: the rerun with savepoints stays within the
// subtransactions PostgreSQL caches per session (64), and a burst cannot hold the rows a
// group locks for long.
const maxGroupUnits = 32

// unitJob is one unit of work waiting for its group's commit.
type unitJob struct {
	fn    func(w *wtx) error
	err   error
	alone bool // run it again on its own (Store.write): its group could not settle it
	done  chan struct{}
}

// unitQueue is the units waiting for the committer.
type unitQueue struct {
	mu      sync.Mutex
	pending []*unitJob
	running int // committers running
}

// update runs fn as a unit of work, in a transaction it may share with the units that
// queue while the ones before it run (see above).
func (s *Store) update(ctx context.Context, fn func(w *wtx) error) error {
	j := &unitJob{fn: fn, done: make(chan struct{})}
	q := &s.units
	q.mu.Lock()
	q.pending = append(q.pending, j)
	if q.running < committers {
		q.running++
		go s.commitUnits()
	}
	q.mu.Unlock()
	// Not bounded by ctx: once queued the unit may commit, and the caller must learn
	// whether it did (as Store.write runs without the caller's cancellation).
	<-j.done
	if j.alone {
		return s.write(ctx, fn)
	}
	return j.err
}

// commitUnits runs queued units in groups until none is left.
func (s *Store) commitUnits() {
	q := &s.units
	for {
		q.mu.Lock()
		group := db.NextGroup(&q.pending, maxGroupUnits)
		if len(group) == 0 {
			q.running-- // none left: the next unit starts a committer
		}
		q.mu.Unlock()
		if len(group) == 0 {
			return
		}

		s.commitGroup(group)
		for _, j := range group {
			close(j.done)
		}
	}
}

// commitGroup runs the units of group in one transaction and settles each: its error, or
// alone when its caller must run it on its own.
func (s *Store) commitGroup(group []*unitJob) {
	w := s.newWtx(context.Background())
	w.grouped = len(group) > 1
	err := s.writeOnce(w, func(w *wtx) error {
		for _, j := range group {
			w.hooks = nil
			if err := j.fn(w); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil:
		s.committed(w)
	case len(group) == 1 && !retryable(w, err):
		group[0].err = storageError(err)
	case len(group) == 1:
		group[0].alone = true
	default:
		s.commitIsolated(group, err)
	}
}

// commitIsolated runs the units of group again after the group failed with err, each in a
// savepoint of its own, and settles each (see above).
func (s *Store) commitIsolated(group []*unitJob, err error) {
	if isCommitErr(err) {
		settleAll(group, func(j *unitJob) { j.err = storageError(err) })
		return
	}
	if beginFailed(err) || lostBeforeCommit(err) {
		settleAll(group, func(j *unitJob) { j.alone = true })
		return
	}
	w := s.newWtx(context.Background())
	w.grouped = true
	err = s.writeOnce(w, func(w *wtx) error {
		for _, j := range group {
			w.hooks, w.conflict = nil, false
			ferr, err := w.inSavepoint(func() error { return runUnit(w, j.fn) })
			if err != nil {
				return err // the transaction itself failed
			}
			j.err, j.alone = storageError(ferr), ferr != nil && (conflict(ferr) || lockTimedOut(ferr) || w.conflict)
		}
		return nil
	})
	switch {
	case err == nil:
		s.committed(w)
	case isCommitErr(err):
		settleAll(group, func(j *unitJob) { j.err, j.alone = storageError(err), false })
	default:
		settleAll(group, func(j *unitJob) { j.err, j.alone = nil, true })
	}
}

func settleAll(group []*unitJob, settle func(j *unitJob)) {
	for _, j := range group {
		settle(j)
	}
}

func isCommitErr(err error) bool {
	_, ok := err.(errCommit)
	return ok
}
