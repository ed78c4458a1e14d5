package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// maxAnswer is how much of an endpoint's answer is read (and dropped), so its connection
// can serve the next delivery.
const maxAnswer = 64 << 10

// deliver makes one attempt and has it recorded meanwhile: recording waits for a commit,
// which the slot's next attempt need not wait for (the delivery stays leased until then,
// so it is not claimed again). attempts tracks the recording.
func (w *Worker) deliver(ctx context.Context, attempts *sync.WaitGroup, j job) {
	if w.cfg.Store.Now().Add(w.cfg.Timeout).After(j.LeaseEnds) {
		// It waited for a slot so long that its lease could end mid-attempt, and another
		// worker could make it at the same time: given back, it is claimed again at once.
		w.giveBack(ctx, j)
		return
	}
	if !j.rendered {
		j.body, j.renderErr = w.payload(ctx, j.HookJob)
	}
	o, ok := w.attempt(ctx, j)
	if !ok { // cut short by a stop: the next start makes it again, at once
		w.giveBack(ctx, j)
		return
	}
	w.toRecord(ctx, attempts, db.HookAttempt{Job: j.HookJob, Outcome: o})
}

// toRecord queues an attempt to be recorded. The attempts that end while a write records
// others are recorded together in the next: one write, one statement prepared, for as
// many as came, instead of one write each.
func (w *Worker) toRecord(ctx context.Context, attempts *sync.WaitGroup, a db.HookAttempt) {
	attempts.Add(1)
	w.recMu.Lock()
	defer w.recMu.Unlock()
	w.unrecorded = append(w.unrecorded, unrecorded{a, attempts})
	if !w.recording {
		w.recording = true
		go w.recordAll(ctx)
	}
}

// unrecorded is an attempt to record, and the Run's count of recordings it is in.
type unrecorded struct {
	db.HookAttempt
	attempts *sync.WaitGroup
}

// recordAll records the queued attempts, in batches, until none is queued.
func (w *Worker) recordAll(ctx context.Context) {
	for {
		w.recMu.Lock()
		batch := w.unrecorded
		w.unrecorded = nil
		if len(batch) == 0 {
			w.recording = false
			w.recMu.Unlock()
			return
		}
		w.recMu.Unlock()
		done := make([]db.HookAttempt, len(batch))
		for i := range batch {
			done[i] = batch[i].HookAttempt
		}
		if !w.record(ctx, done) {
			// A retry is due from its next attempt on, not from when its lease ends;
			// an attempt not recorded is due again when its lease ends.
			w.markDue()
			w.wakeClaimer()
		}
		for _, u := range batch {
			u.attempts.Done()
		}
	}
}

// record records attempts and counts them; it outlives a stop, within finishTimeout. It
// reports whether every attempt was recorded as delivered: nothing of them is left to
// claim.
func (w *Worker) record(ctx context.Context, batch []db.HookAttempt) (allDelivered bool) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	kept, err := w.cfg.Store.FinishHookDeliveries(fctx, batch)
	if err != nil {
		w.cfg.Log.Error("webhooks: record attempts; they are made again when their leases end", "attempts", len(batch), "err", err)
		return false
	}
	allDelivered = true
	for i, a := range batch {
		allDelivered = allDelivered && a.Outcome.Status == db.HookDelivered
		if !kept[i] {
			continue // the lease ran out, or the webhook or event is gone: not this worker's to count
		}
		switch a.Outcome.Status {
		case db.HookDelivered:
			w.delivered.Add(1)
		case db.HookPending:
			w.retried.Add(1)
		default:
			w.failed.Add(1)
			w.cfg.Log.Warn("webhooks: delivery failed for good", "webhook", a.Job.Webhook.WebhookID, "event", a.Job.Event.EventID,
				"attempts", a.Job.Attempt+1, "err", a.Outcome.Error)
		}
	}
	return allDelivered
}

// giveBack ends the lease of a delivery without an attempt, so that it is due at once.
func (w *Worker) giveBack(ctx context.Context, j job) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if err := w.cfg.Store.ReleaseHookDelivery(fctx, j.HookJob); err != nil {
		w.cfg.Log.Warn("webhooks: give back a delivery; it is due again when its lease ends", "event", j.Event.EventID, "err", err)
	}
	w.markDue()
	w.wakeClaimer()
}

// attempt POSTs the event and says what came of it; false when ctx ended meanwhile.
func (w *Worker) attempt(ctx context.Context, j job) (db.HookOutcome, bool) {
	now := w.cfg.Store.Now()
	o := db.HookOutcome{At: now, Status: db.HookDelivered}
	err := j.renderErr
	if err == nil {
		o.ResponseStatus, err = w.post(ctx, j.HookJob, j.body)
	}
	if ctx.Err() != nil {
		return o, false
	}
	if err == nil {
		return o, true
	}
	o.Error = err.Error()
	if next := now.Add(w.cfg.Backoff(j.Attempt + 1)); next.Before(j.CreatedAt.Add(w.cfg.Window)) {
		o.Status, o.Next = db.HookPending, next
	} else {
		o.Status = db.HookFailed
	}
	return o, true
}

// payload renders the event of one job (payloads).
func (w *Worker) payload(ctx context.Context, j db.HookJob) ([]byte, error) {
	bodies, err := w.payloads(ctx, []db.HookJob{j})
	if err != nil {
		return nil, err
	}
	return bodies[0], nil
}

// payloads renders the claimed jobs' events, in one read of their messages (or none, for
// what the hub rendered for its streams a moment ago); an error fails every attempt, to
// be retried.
func (w *Worker) payloads(ctx context.Context, jobs []db.HookJob) ([][]byte, error) {
	evs := make([]db.Event, len(jobs))
	for i := range jobs {
		evs[i] = jobs[i].Event
	}
	out, err := w.cfg.Payloads.Payloads(ctx, evs)
	if err != nil {
		return nil, fmt.Errorf("the event could not be read: %w", err)
	}
	return out, nil
}

// post sends one signed request and returns the answer's status; an error when the
// attempt failed.
func (w *Worker) post(ctx context.Context, j db.HookJob, body []byte) (int, error) {
	key, err := db.WebhookKey(j.Webhook.Secret)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, j.Webhook.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("the URL cannot be requested: %w", err)
	}
	// The wall clock's, not the store's: a receiver checks it against its own clock (the
	// Standard Webhooks and Svix libraries refuse more than five minutes off), and the test
	// controls may have moved the store's days ahead (extensions section 6).
	ts := time.Now().Unix()
	setHeaders(req.Header, j.Event.EventID, ts, Sign(key, j.Event.EventID, ts, body))
	resp, err := w.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
		resp.Body.Close()
	}
	switch {
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return 0, fmt.Errorf("no answer within %s", w.cfg.Timeout)
	case err != nil && resp == nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the webhook's own: no need to repeat it
		}
		return 0, err
	case resp.StatusCode/100 == 2:
		return resp.StatusCode, nil
	case resp.StatusCode/100 == 3:
		return resp.StatusCode, fmt.Errorf("HTTP %d: redirects are not followed", resp.StatusCode)
	}
	return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
}
