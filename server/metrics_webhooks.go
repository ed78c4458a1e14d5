package server

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// writeWebhookMetrics prints the webhook worker's attempts by outcome and the deliveries
// waiting. The counters are this process's; the backlog is the store's, every process's.
func (s *Server) writeWebhookMetrics(ctx context.Context, b *strings.Builder) {
	n := s.cfg.Webhooks.Counts()
	header(b, "inboxd_webhook_deliveries_total", "counter", "Webhook delivery attempts by outcome: delivered (2xx in time), retried (failed, retried later), failed (failed for good after 24 hours).")
	fmt.Fprintf(b, "inboxd_webhook_deliveries_total{outcome=\"delivered\"} %d\n", n.Delivered)
	fmt.Fprintf(b, "inboxd_webhook_deliveries_total{outcome=\"retried\"} %d\n", n.Retried)
	fmt.Fprintf(b, "inboxd_webhook_deliveries_total{outcome=\"failed\"} %d\n", n.Failed)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if backlog, err := s.store.HookBacklog(ctx); err == nil {
		header(b, "inboxd_webhook_backlog", "gauge", "Webhook deliveries pending: not yet delivered, and not failed for good.")
		fmt.Fprintf(b, "inboxd_webhook_backlog %d\n", backlog)
	}
}
