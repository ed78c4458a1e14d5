package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/inboxd/inboxd/db"
)

// maxAnswer is how much of an endpoint's answer is read (and dropped), so its connection
// can serve the next delivery.
const maxAnswer = 64 << 10

// deliver makes one attempt and records it.
func (w *Worker) deliver(ctx context.Context, j db.HookJob) {
	o, ok := w.attempt(ctx, j)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	if !ok { // cut short by a stop: the next start makes it again, at once
		if err := w.cfg.Store.ReleaseHookDelivery(fctx, j); err != nil {
			w.cfg.Log.Warn("webhooks: give back a delivery; it is due again when its lease ends", "event", j.Event.EventID, "err", err)
		}
		return
	}
	kept, err := w.cfg.Store.FinishHookDelivery(fctx, j, o)
	switch {
	case err != nil:
		w.cfg.Log.Error("webhooks: record an attempt", "webhook", j.Webhook.WebhookID, "event", j.Event.EventID, "err", err)
		return
	case !kept:
		return // the lease ran out, or the webhook or event is gone: not this worker's to count
	}
	switch o.Status {
	case db.HookDelivered:
		w.delivered.Add(1)
	case db.HookPending:
		w.retried.Add(1)
	default:
		w.failed.Add(1)
		w.cfg.Log.Warn("webhooks: delivery failed for good", "webhook", j.Webhook.WebhookID, "event", j.Event.EventID,
			"attempts", j.Attempt+1, "err", o.Error)
	}
}

// attempt POSTs the event and says what came of it; false when ctx ended meanwhile.
func (w *Worker) attempt(ctx context.Context, j db.HookJob) (db.HookOutcome, bool) {
	now := w.cfg.Store.Now()
	o := db.HookOutcome{At: now, Status: db.HookDelivered}
	body, err := w.payload(ctx, j)
	if err == nil {
		o.ResponseStatus, err = w.post(ctx, j, body, now)
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

// payload renders the event with its message as stored now.
func (w *Worker) payload(ctx context.Context, j db.HookJob) ([]byte, error) {
	msgs, err := w.cfg.Store.EventMessages(ctx, []int64{j.Event.MessageRow})
	if err != nil {
		return nil, fmt.Errorf("the event could not be read: %w", err)
	}
	return j.Event.Payload(msgs[j.Event.MessageRow])
}

// post sends one signed request and returns the answer's status; an error when the
// attempt failed.
func (w *Worker) post(ctx context.Context, j db.HookJob, body []byte, now time.Time) (int, error) {
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
	ts := now.Unix()
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
