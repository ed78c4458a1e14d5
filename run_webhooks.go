package main

import (
	"context"

	"github.com/inboxd/inboxd/mail/events"
	"github.com/inboxd/inboxd/mail/webhook"
)

// The event hub and the webhook worker (extensions sections 3-5): built before the API,
// which streams from the hub and whose /metrics shows the worker's counts, started with
// the other workers and stopped with them. The worker posts the payloads the hub rendered
// for the streams, so an event both streamed and posted is rendered once.

// buildWebhooks builds the event hub and the webhook worker.
func (m *Main) buildWebhooks(ctx context.Context, _ *parts) (err error) {
	if m.hub, err = events.New(ctx, m.store, events.Options{Log: m.Log}); err != nil {
		return err
	}
	m.webhooks = webhook.New(webhook.Config{Store: m.store, Log: m.Log, Payloads: m.hub, Clock: m.clock})
	return nil
}

// startWebhooks runs the hub and the webhook worker until ctx ends.
func (m *Main) startWebhooks(ctx context.Context) {
	m.hubDone, m.webhooksDone = make(chan struct{}), make(chan struct{})
	go func() { m.hub.Run(ctx); close(m.hubDone) }()
	go func() { m.webhooks.Run(ctx); close(m.webhooksDone) }()
}

// waitWebhooks waits for the stopped hub and webhook worker: attempts in flight are cut
// short and made again after a restart, once their leases end.
func (m *Main) waitWebhooks() {
	if m.webhooksDone != nil {
		<-m.webhooksDone
		<-m.hubDone
	}
}
