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

// job is a claimed delivery with its payload, rendered when it was claimed or, for one
// handed over, before its attempt.
type job struct {
	db.HookJob
	rendered  bool
	body      []byte
	renderErr error // the payload could not be rendered: the attempt fails, to be retried
}

// claim claims what the held deliveries leave room for and starts an attempt for each
// that a free slot allows; the others wait for a slot. It reports whether it claimed any.
func (w *Worker) claim(ctx context.Context, attempts *sync.WaitGroup) bool {
	c, passed, ok := w.claimRequest()
	if !ok {
		return false
	}
	jobs, err := w.cfg.Store.ClaimHookDeliveries(ctx, c)
	if err != nil {
		w.cfg.Log.Error("webhooks: claim deliveries", "err", err)
		return false
	}
	bodies, renderErr := w.payloads(ctx, jobs)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(jobs) == 0 && !passed {
		w.backlog = false // nothing it had no room for is left
	}
	for i := range jobs {
		j := job{HookJob: jobs[i], rendered: true, renderErr: renderErr}
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
// PerWebhook still (passed reports such a webhook); false when the worker holds all it
// may.
func (w *Worker) claimRequest() (c db.HookClaim, passed, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	perWebhook := w.cfg.PerWebhook * claimAhead
	room := w.cfg.MaxInFlight*claimAhead - w.held - w.reservedAll
	if room <= 0 {
		return db.HookClaim{}, true, false
	}
	held := make(map[int64]int, len(w.busy)+len(w.waiting)+len(w.reserved))
	for _, rows := range []map[int64]int{w.busy, w.reserved} {
		for row := range rows {
			held[row] = w.heldOf(row)
		}
	}
	for row := range w.waiting {
		held[row] = w.heldOf(row)
	}
	for row, n := range held {
		if n > w.cfg.PerWebhook {
			held[row], passed = perWebhook, true // enough for now: claimed for again once it drains
		}
	}
	return db.HookClaim{Limit: room, PerWebhook: perWebhook, Busy: held, Lease: w.cfg.Lease}, passed, true
}

// Reserve makes room for a delivery the store queues leased to the worker (db.HookTaker),
// within the bounds of a claim: PerWebhook x claimAhead of the webhook, MaxInFlight x
// claimAhead in all. Without room the delivery is queued unleased, and the next wake
// claims.
func (w *Worker) Reserve(webhookRow int64) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.run == nil || w.held+w.reservedAll >= w.cfg.MaxInFlight*claimAhead || w.heldOf(webhookRow) >= w.cfg.PerWebhook*claimAhead {
		w.refused()
		return 0, false
	}
	w.reserved[webhookRow]++
	w.reservedAll++
	return w.cfg.Lease, true
}

// Missed notes a delivery queued without being offered (db.HookTaker): claimed once its
// unit of work has committed.
func (w *Worker) Missed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refused()
}

// refused notes a delivery queued unleased by a unit of work still running: the worker
// claims once it has committed. It is told inside the unit, so the store's next
// EventsCommitted taken now closes after that commit (the unit appended its event); one
// taken for an earlier refusal does too while it is still open. Call with w.mu.
func (w *Worker) refused() {
	w.backlog = true
	select {
	case <-w.afterRefusal: // nil blocks: none taken yet
		w.afterRefusal = w.cfg.Store.EventsCommitted()
	default:
		if w.afterRefusal == nil {
			w.afterRefusal = w.cfg.Store.EventsCommitted()
		}
	}
	w.wakeClaimer() // Run waits on it from now on
}

// Take takes the deliveries the store reserved room for and leased to the worker, once
// their unit of work has committed (db.HookTaker): each is started when a slot of its
// webhook is free, else it waits for one. Their payloads are rendered before their
// attempts, not here: the caller is ingest. After Run has ended they are given back.
func (w *Worker) Take(jobs []db.HookJob) {
	w.mu.Lock()
	var back []job
	for i := range jobs {
		w.unreserve(jobs[i].Webhook.Row)
		j := job{HookJob: jobs[i]}
		switch {
		case w.run == nil:
			back = append(back, j)
		case w.hold(j):
			w.run.attempts.Add(1)
			go w.serve(w.run.ctx, w.run.attempts, j)
		}
	}
	w.mu.Unlock()
	for _, j := range back {
		w.giveBack(context.Background(), j)
	}
}

// Cancel gives back the room of deliveries that were not queued after all (db.HookTaker).
func (w *Worker) Cancel(webhookRows []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, row := range webhookRows {
		w.unreserve(row)
	}
}

// unreserve ends the reservation of a delivery to webhook row. Call with w.mu.
func (w *Worker) unreserve(row int64) {
	if w.reserved[row]--; w.reserved[row] <= 0 {
		delete(w.reserved, row)
	}
	w.reservedAll--
}

// wakeClaimer wakes Run to claim again, without ever blocking.
func (w *Worker) wakeClaimer() {
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// heldOf is how many deliveries of a webhook the worker holds, or has room reserved for.
// Call with w.mu.
func (w *Worker) heldOf(row int64) int { return w.busy[row] + len(w.waiting[row]) + w.reserved[row] }

// hold takes a claimed delivery in: true when a slot is free for it and the caller
// starts it, else it waits for one. Call with w.mu.
func (w *Worker) hold(j job) bool {
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
		w.due = w.due || w.backlog // what it had no room for can be claimed now
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
