package webhook

import (
	"context"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// claimAhead is how many rounds of a webhook's attempts one claim may lease: the worker
// holds up to PerWebhook x claimAhead deliveries of a webhook (in flight, or waiting for
// one of its PerWebhook slots) and claims for it again only once it holds PerWebhook or
// fewer. An endpoint that answers at once then costs a claim (a write) per several rounds
// of attempts instead of one per attempt; one that hangs holds at most claimAhead rounds
// of leases, and a delivery that waited so long that its lease could end mid-attempt is
// given back instead of made.
const claimAhead = 4

// job is a claimed delivery with its payload, rendered when it was claimed.
type job struct {
	db.HookJob
	body      []byte
	renderErr error     // the payload could not be rendered: the attempt fails, to be retried
	leaseEnds time.Time // no later than the lease the store recorded
}

// claim claims what the held deliveries leave room for and starts an attempt for each
// that a free slot allows; the others wait for a slot. It reports whether it claimed any.
func (w *Worker) claim(ctx context.Context, attempts *sync.WaitGroup) bool {
	c, ok := w.claimRequest()
	if !ok {
		return false
	}
	leaseEnds := w.cfg.Store.Now().Add(c.Lease) // the store reads its clock after this
	jobs, err := w.cfg.Store.ClaimHookDeliveries(ctx, c)
	if err != nil {
		w.cfg.Log.Error("webhooks: claim deliveries", "err", err)
		return false
	}
	bodies, renderErr := w.payloads(ctx, jobs)
	for i := range jobs {
		j := job{HookJob: jobs[i], renderErr: renderErr, leaseEnds: leaseEnds}
		if renderErr == nil {
			j.body = bodies[i]
		}
		if w.hold(j) {
			attempts.Add(1)
			go w.serve(ctx, attempts, j)
		}
	}
	return len(jobs) > 0
}

// claimRequest is the claim that what the worker holds leaves room for: up to
// PerWebhook x claimAhead of each webhook, nothing of a webhook that holds more than
// PerWebhook still; false when the worker holds all it may.
func (w *Worker) claimRequest() (db.HookClaim, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	perWebhook := w.cfg.PerWebhook * claimAhead
	room := w.cfg.MaxInFlight*claimAhead - w.held
	if room <= 0 {
		return db.HookClaim{}, false
	}
	held := make(map[int64]int, len(w.busy)+len(w.waiting))
	for row := range w.busy {
		held[row] = w.heldOf(row)
	}
	for row := range w.waiting {
		held[row] = w.heldOf(row)
	}
	for row, n := range held {
		if n > w.cfg.PerWebhook {
			held[row] = perWebhook // enough for now: claimed for again once it drains
		}
	}
	return db.HookClaim{Limit: room, PerWebhook: perWebhook, Busy: held, Lease: w.cfg.Lease}, true
}

// wakeClaimer wakes Run to claim again, without ever blocking.
func (w *Worker) wakeClaimer() {
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// heldOf is how many deliveries of a webhook the worker holds. Call with w.mu.
func (w *Worker) heldOf(row int64) int { return w.busy[row] + len(w.waiting[row]) }

// hold takes a claimed delivery in: true when a slot is free for it and the caller
// starts it, else it waits for one.
func (w *Worker) hold(j job) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held++
	row := j.Webhook.Row
	if w.busy[row] < w.cfg.PerWebhook && w.inflight < w.cfg.MaxInFlight {
		w.busy[row]++
		w.inflight++
		return true
	}
	w.waiting[row] = append(w.waiting[row], j)
	return false
}

// serve makes the attempts of one slot: j, then the deliveries that wait for a slot,
// until none does.
func (w *Worker) serve(ctx context.Context, attempts *sync.WaitGroup, j job) {
	defer attempts.Done()
	for ok := true; ok; j, ok = w.next(j.Webhook.Row) {
		w.deliver(ctx, attempts, j)
	}
}

// next ends an attempt of webhook row and returns the delivery its slot makes next: the
// webhook's oldest waiting, else one of another webhook with a free slot (the bound on
// all attempts may have held it back); false when none waits. It wakes the claimer when
// the webhook holds few enough to be claimed for again.
func (w *Worker) next(row int64) (job, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held--
	w.inflight--
	if w.busy[row]--; w.busy[row] <= 0 {
		delete(w.busy, row)
	}
	if w.heldOf(row) <= w.cfg.PerWebhook {
		w.wakeClaimer()
	}
	pick, ok := row, len(w.waiting[row]) > 0
	for r, q := range w.waiting {
		if ok {
			break
		}
		pick, ok = r, len(q) > 0 && w.busy[r] < w.cfg.PerWebhook
	}
	if !ok {
		return job{}, false
	}
	j := w.waiting[pick][0]
	if w.waiting[pick] = w.waiting[pick][1:]; len(w.waiting[pick]) == 0 {
		delete(w.waiting, pick)
	}
	w.busy[pick]++
	w.inflight++
	return j, true
}
