package mail

import (
	"context"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
)

// outboundBatch is how many due queue rows one pass of the worker takes.
const outboundBatch = 200

// RunOutbound delivers queued mail until ctx ends. It wakes when a send commits and once a
// second for retries that come due. Every outcome is written back to the queue and the
// delivery record in one transaction, so a crash repeats at most the attempt in flight,
// and a local delivery repeated that way is absorbed by Message-ID de-duplication.
func (s *Service) RunOutbound(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for s.drainOutbound(ctx) {
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-tick.C:
		}
	}
}

// drainOutbound runs one batch and reports whether a full batch was found (more may wait).
func (s *Service) drainOutbound(ctx context.Context) bool {
	jobs, err := s.Store.ClaimOutbound(ctx, outboundBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Error("outbound: claim", "err", err)
		}
		return false
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			return false
		}
		if err := s.Store.FinishOutbound(ctx, j, s.attempt(ctx, j)); err != nil && ctx.Err() == nil {
			s.Log.Error("outbound: record outcome", "message", j.MessageID, "err", err)
		}
	}
	return len(jobs) == outboundBatch
}

// attempt delivers one job. Recipients on this server's domains are delivered straight
// into their inbox; any other recipient waits (parked, status queued) for an outbound
// transport, which this server does not have yet.
func (s *Service) attempt(ctx context.Context, j db.OutboundJob) db.OutboundOutcome {
	_, domain, _ := strings.Cut(j.Recipient, "@")
	local, err := s.localDomain(ctx, domain)
	if err != nil {
		return retryOutcome(s.Store.Now(), j.Attempts, "temporary local lookup failure")
	}
	if !local {
		return db.OutboundOutcome{Park: true}
	}
	inbox, err := s.Store.LocalInbox(ctx, j.Recipient)
	switch {
	case db.IsCode(err, db.ECodeNotFound):
		return bounce("550", "5.1.1", "unknown recipient")
	case err != nil:
		return retryOutcome(s.Store.Now(), j.Attempts, "temporary local lookup failure")
	case inbox.Retired:
		return bounce("550", "5.1.1", "recipient mailbox was deleted")
	case inbox.DeliveryStatus != db.DeliveryReady:
		return retryOutcome(s.Store.Now(), j.Attempts, "recipient mailbox setup is not finished")
	}
	now := s.Store.Now()
	msg, err := Inbound(j.Raw, inbox.ID, now)
	if err != nil {
		return bounce("554", "5.6.0", "message could not be parsed")
	}
	return db.OutboundOutcome{
		Update: db.RecipientDelivery{Status: db.RecipientDelivered, Provider: "local", SMTPStatusCode: "250", SMTPEnhancedStatusCode: "2.0.0",
			DeliveryEventAt: db.Time{Time: now}.String()},
		Local: &msg,
	}
}

func bounce(code, enhanced, reason string) db.OutboundOutcome {
	return db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientBounced, Provider: "local", Reason: reason,
		SMTPStatusCode: code, SMTPEnhancedStatusCode: enhanced}}
}

// retryOutcome reschedules with exponential backoff from 30 s, capped at one hour.
func retryOutcome(now time.Time, attempts int, reason string) db.OutboundOutcome {
	delay := 30 * time.Second << min(attempts, 7)
	at := now.Add(min(delay, time.Hour))
	return db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDeferred, Provider: "local", Reason: reason}, RetryAt: &at}
}
