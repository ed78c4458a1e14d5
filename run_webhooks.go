package main

import (
	"context"

	"github.com/inboxd/inboxd/mail/webhook"
)

// The webhook worker (extensions section 3): built before the API, whose /metrics shows
// its counts, started with the other workers and stopped with them.

// buildWebhooks builds the webhook worker.
func (m *Main) buildWebhooks(context.Context, *parts) error {
	m.webhooks = webhook.New(webhook.Config{Store: m.store, Log: m.Log})
	return nil
}

// startWebhooks runs the webhook worker until ctx ends.
func (m *Main) startWebhooks(ctx context.Context) {
	m.webhooksDone = make(chan struct{})
	go func() { m.webhooks.Run(ctx); close(m.webhooksDone) }()
}

// waitWebhooks waits for the stopped webhook worker: attempts in flight are cut short and
// made again after a restart, once their leases end.
func (m *Main) waitWebhooks() {
	if m.webhooksDone != nil {
		<-m.webhooksDone
	}
}
