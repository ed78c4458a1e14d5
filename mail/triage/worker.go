package triage

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Worker analyzes the messages of the triage queue and writes each outcome back: complete,
// failed, or (for a provider that asked for it) another attempt later.
//
// One loop claims due messages (a batch at a time), a bounded pool of Workers goroutines
// analyzes them, and one committer stores the outcomes, as many as are ready in one
// transaction, so a fast provider costs the database few commits. A message stays queued
// until its outcome is stored, so a restart resumes the queue; an analysis cut short by
// shutdown is simply done again (its triage unit is not charged twice).
type Worker struct {
	Store    db.Store
	Provider Provider
	// Workers bounds concurrent analyses (default 4).
	Workers int
	// Batch bounds the messages claimed and not yet stored (default 4 per worker).
	Batch int
	// Poll is how often the queue is checked when nothing woke the worker (default 200ms):
	// it bounds how long a new message waits.
	Poll time.Duration
	// Now is the clock of analyzedAt, failedAt and retries (default Store.Now).
	Now func() time.Time
	Log *slog.Logger

	once sync.Once
	kick chan struct{}
}

// LeaseMargin is the part of a claim's lease (db.TriageJob.LeaseEnds) an analysis leaves
// for storing its outcome. Past the lease's end another process may claim the message and
// analyze it too; so an analysis runs only while more than LeaseMargin of the lease is
// left, and is cut short then: the message stays queued, as if this process had stopped,
// for the next claim. A job claimed with others waits for a free analyzer, and with a slow
// endpoint may wait that long.
const LeaseMargin = 15 * time.Second

// finishTimeout bounds storing outcomes once the worker is stopping.
const finishTimeout = 10 * time.Second

// maxCommit bounds the outcomes stored in one transaction.
const maxCommit = 256

func (w *Worker) init() {
	w.once.Do(func() {
		w.kick = make(chan struct{}, 1)
		if w.Workers <= 0 {
			w.Workers = 4
		}
		if w.Batch < w.Workers {
			w.Batch = 4 * w.Workers
		}
		if w.Poll <= 0 {
			w.Poll = 200 * time.Millisecond
		}
		if w.Now == nil {
			w.Now = w.Store.Now
		}
		if w.Log == nil {
			w.Log = slog.Default()
		}
	})
}

// Wake tells the worker that messages may be waiting.
func (w *Worker) Wake() {
	w.init()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run processes the queue until ctx ends, then stores what was analyzed and returns.
func (w *Worker) Run(ctx context.Context) {
	w.init()
	var (
		mu       sync.Mutex
		inflight = map[int64]bool{} // claimed, not yet stored
		jobs     = make(chan db.TriageJob, w.Batch)
		outcomes = make(chan db.TriageOutcome, w.Batch)
		pool     sync.WaitGroup
		done     = make(chan struct{})
	)
	for range w.Workers {
		pool.Add(1)
		go func() {
			defer pool.Done()
			for j := range jobs {
				if o, ok := w.analyze(ctx, j); ok {
					outcomes <- o
				} else {
					mu.Lock()
					delete(inflight, j.MessageRow)
					mu.Unlock()
				}
			}
		}()
	}
	go func() {
		defer close(done)
		for o := range outcomes {
			batch := []db.TriageOutcome{o}
		more:
			for len(batch) < maxCommit {
				select {
				case o, ok := <-outcomes:
					if !ok {
						break more
					}
					batch = append(batch, o)
				default:
					break more
				}
			}
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			w.finish(fctx, batch)
			cancel()
			mu.Lock()
			for _, o := range batch {
				delete(inflight, o.MessageRow)
			}
			mu.Unlock()
			w.Wake()
		}
	}()

	tick := time.NewTicker(w.Poll)
	defer tick.Stop()
	for ctx.Err() == nil {
		mu.Lock()
		room := w.Batch - len(inflight)
		skip := make([]int64, 0, len(inflight))
		for id := range inflight {
			skip = append(skip, id)
		}
		mu.Unlock()
		full := false
		if room > 0 && w.due(ctx) {
			claimed, err := db.ClaimTriage(ctx, w.Store, w.Now(), room, skip)
			if err != nil && ctx.Err() == nil {
				w.Log.Error("triage: claim", "err", err)
			}
			mu.Lock()
			for _, j := range claimed {
				inflight[j.MessageRow] = true
			}
			mu.Unlock()
			for _, j := range claimed {
				jobs <- j // never blocks: at most Batch jobs are in flight
			}
			full = len(claimed) == room
		}
		if full {
			continue // there may be more; a stored batch wakes us when there is room
		}
		select {
		case <-ctx.Done():
		case <-w.kick:
		case <-tick.C:
		}
	}
	close(jobs)
	pool.Wait()
	close(outcomes)
	<-done
}

// finish stores a batch of outcomes. An outcome whose claim no longer held (another
// process took the message over once this one's lease ran out) was not stored: that
// process's analysis is the one that counts, so this one is only told of.
func (w *Worker) finish(ctx context.Context, batch []db.TriageOutcome) {
	notKept, err := w.Store.FinishTriage(ctx, batch)
	if err != nil {
		w.Log.Error("triage: store results", "messages", len(batch), "err", err)
		return
	}
	if len(notKept) > 0 {
		w.Log.Warn("triage: outcomes not kept, their messages were claimed again since", "messages", notKept)
	}
}

// due reports whether a queued message is due: a cheap read, so an idle queue costs no
// write transaction per poll.
func (w *Worker) due(ctx context.Context) bool {
	at, ok, err := w.Store.NextTriageDue(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.Log.Error("triage: queue", "err", err)
		}
		return false
	}
	return ok && !at.After(w.Now())
}

// withinLease bounds an analysis of j by its claim's lease (LeaseMargin): ctx with a
// deadline that much before the lease ends, or false when that moment has passed.
func (w *Worker) withinLease(ctx context.Context, j db.TriageJob) (context.Context, context.CancelFunc, bool) {
	if j.LeaseEnds.IsZero() {
		return ctx, func() {}, true
	}
	left := j.LeaseEnds.Sub(w.Now()) - LeaseMargin
	if left <= 0 {
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	return ctx, cancel, true
}

// analyze runs one analysis and decides its outcome; false when the worker is stopping,
// or the claim's lease is (nearly) over, and the message should stay queued as it is.
func (w *Worker) analyze(ctx context.Context, j db.TriageJob) (db.TriageOutcome, bool) {
	if ctx.Err() != nil {
		return db.TriageOutcome{}, false
	}
	ctx, cancel, ok := w.withinLease(ctx, j)
	if !ok {
		return db.TriageOutcome{}, false
	}
	defer cancel()
	in := NewInput(j.From, j.To, j.Cc, j.Subject, j.ReceivedAt, j.Text).WithSignals(j.Signals)
	start := w.Now()
	s, err := w.Provider.Analyze(ctx, in)
	if ctx.Err() != nil {
		return db.TriageOutcome{}, false
	}
	now := w.Now()
	o := j.Outcome()
	if err == nil {
		model := w.Provider.Model()
		if s.Model != "" {
			model = s.Model
		}
		o.Result = Derive(s, model, now, now.Sub(start), in.Truncated)
		return o, true
	}
	e := asError(err)
	attempt := j.Attempts + 1
	if e.Retry && attempt < MaxAttempts {
		o.RetryAt = now.Add(Backoff(attempt, e.RetryAfter))
		w.Log.Warn("triage: provider failed, will retry", "message", j.MessageID, "attempt", attempt, "at", o.RetryAt, "err", err)
		return o, true
	}
	w.Log.Warn("triage: failed", "message", j.MessageID, "code", e.Code, "attempts", attempt, "err", err)
	o.Result = Failed(e.Code, now)
	return o, true
}
