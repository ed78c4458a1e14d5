package search

import (
	"context"
	"math/rand/v2"
	"time"
)

// The index is derived data, so whatever fails as it is opened, rebuilt or updated (a
// full disk, a directory it may not write, the store unreadable for a moment) is tried
// again, after a backoff, for as long as the server runs: it heals once the cause is
// gone. Meanwhile it is degraded: Degraded says so (for /metrics), the searches it cannot
// answer get ErrNotReady, and the log says so when it starts, at most every
// stillDegradedEvery while it lasts, and when it ends, rather than at every attempt.

// stillDegradedEvery is how often a lasting failure is logged again.
const stillDegradedEvery = 10 * time.Minute

// outage is the failures in a row of the indexer's loop.
type outage struct {
	attempts int       // failed attempts in a row
	since    time.Time // when the first of them failed
	logged   time.Time // when one of them was last logged
}

// Degraded reports whether the last attempt to open, rebuild or update the index failed;
// it is being tried again.
func (x *Indexer) Degraded() bool { return x.degraded.Load() }

// Failures returns how many attempts to open, rebuild or update the index failed since
// Start.
func (x *Indexer) Failures() uint64 { return x.failures.Load() }

// retrying reports whether the loop is trying again after a failure (loop goroutine).
func (x *Indexer) retrying() bool { return x.outage.attempts > 0 }

// failed records a failed attempt at stage (open, rebuild or update), logs it if it is
// the first in a row or the last log line is stillDegradedEvery old, and waits before
// the next attempt. It returns false if ctx ended meanwhile.
func (x *Indexer) failed(ctx context.Context, stage string, err error) bool {
	now := time.Now()
	o := &x.outage
	o.attempts++
	x.failures.Add(1)
	wait := backoff(o.attempts, x.opt.RetryMin, x.opt.RetryMax)
	switch {
	case o.attempts == 1:
		o.since, o.logged = now, now
		x.degraded.Store(true)
		x.log.Error("search index degraded; retrying until it works", "stage", stage, "err", err, "retry_in", wait)
	case now.Sub(o.logged) >= stillDegradedEvery:
		o.logged = now
		x.log.Warn("search index still degraded; retrying", "stage", stage, "err", err,
			"attempts", o.attempts, "degraded_s", int64(now.Sub(o.since).Seconds()), "retry_in", wait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// healed ends an outage after an attempt that worked.
func (x *Indexer) healed() {
	if !x.retrying() {
		return
	}
	x.log.Info("search index recovered", "attempts", x.outage.attempts,
		"degraded_s", int64(time.Since(x.outage.since).Seconds()))
	x.outage = outage{}
	x.degraded.Store(false)
}

// backoff is the wait after the nth failure in a row: lo doubled with each failure,
// capped at hi, of which a random half is left out so that processes on one store do not
// retry in step (so at the cap the attempts come every hi/2 to hi).
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}
