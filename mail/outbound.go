package mail

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// outboundBatch is how many due queue rows one pass of the dispatcher takes.
const outboundBatch = 500

// finishTimeout bounds recording an outcome once the server is stopping: an answer the
// relay gave must still be written down.
const finishTimeout = 10 * time.Second

// RunOutbound delivers queued mail until ctx ends.
//
// A dispatcher routes every due queue row: recipients on this server's domains are stored
// straight into their inbox, and, with no relay configured, recipients elsewhere are
// recorded by the sink; both in one transaction per batch, together with the delivery
// record, so a crash repeats nothing and loses nothing. With a relay, rows for recipients
// elsewhere go to Workers relay workers. A relay worker marks its row `attempting` before
// it talks to the relay and `handoff` right before the end-of-data dot (after which the
// relay may hold the message); see db.RecoverOutbound for what a restart makes of each.
//
// The dispatcher wakes when a send commits and every Poll for retries that came due.
func (s *Service) RunOutbound(ctx context.Context) {
	cfg := s.outbound.withDefaults()
	if rec, err := s.store.RecoverOutbound(ctx, ProviderRelay); err != nil {
		if ctx.Err() == nil {
			s.log.Error("outbound: recover", "err", err)
		}
	} else if rec.Requeued > 0 || rec.Uncertain > 0 {
		s.log.Warn("outbound: recovered the queue after a restart", "requeued", rec.Requeued, "uncertain", rec.Uncertain,
			"note", "uncertain recipients were handed to the relay when the server stopped; they are recorded accepted and not resent")
	}
	var wg sync.WaitGroup
	relayKick := make(chan struct{}, 1)
	if cfg.Transport != nil {
		for range cfg.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.runRelayWorker(ctx, cfg, relayKick)
			}()
		}
	}
	tick := time.NewTicker(cfg.Poll)
	defer tick.Stop()
	for ctx.Err() == nil {
		for s.dispatchOutbound(ctx, cfg, relayKick) {
		}
		select {
		case <-ctx.Done():
		case <-s.kick:
		case <-tick.C:
		}
	}
	wg.Wait()
}

// dispatchOutbound routes one batch and reports whether a full batch was found (more may
// wait).
func (s *Service) dispatchOutbound(ctx context.Context, cfg OutboundConfig, relayKick chan struct{}) bool {
	if ctx.Err() != nil {
		return false
	}
	// A pass is short, so it is not interrupted: the SQLite driver runs each statement of
	// a cancellable context on a goroutine of its own, which costs more than the statement.
	ctx = context.WithoutCancel(ctx)
	jobs, err := s.store.ClaimOutbound(ctx, outboundBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("outbound: claim", "err", err)
		}
		return false
	}
	if len(jobs) == 0 {
		return false
	}
	r := router{s: s, ctx: ctx, domains: map[string]bool{}, messages: map[int64]*routed{}}
	var done []db.OutboundJob
	var outcomes []db.OutboundOutcome
	var relay []int64
	later := false
	for _, j := range jobs {
		o, next := r.route(cfg, j)
		switch next {
		case toRelay:
			relay = append(relay, j.ID)
		case nextPass:
			later = true
		default:
			done = append(done, j)
			outcomes = append(outcomes, o)
		}
	}
	s.logSettled(done, outcomes)
	if err := s.store.FinishOutboundBatch(ctx, done, outcomes); err != nil && ctx.Err() == nil {
		// One bad outcome must not hold up the others: record them one by one.
		s.log.Warn("outbound: batch outcome failed, recording one by one", "err", err)
		for i := range done {
			if err := s.store.FinishOutbound(ctx, done[i], outcomes[i]); err != nil && ctx.Err() == nil {
				s.log.Error("outbound: record outcome", "message", done[i].MessageID, "recipient", done[i].Recipient, "err", err)
			}
		}
	}
	if len(relay) > 0 {
		if err := s.store.RouteToRelay(ctx, relay); err != nil && ctx.Err() == nil {
			s.log.Error("outbound: route to relay", "err", err)
		}
		select {
		case relayKick <- struct{}{}:
		default:
		}
	}
	return later || len(jobs) == outboundBatch
}

// outboundPassBytes bounds the raw bytes of the messages one dispatch pass delivers into
// local inboxes: each is held, parsed and scanned until the pass commits, and a pass of
// 500 recipients of 500 different large messages would hold gigabytes. A pass takes at
// least one message whatever its size; the rest wait for the next pass, at once.
const outboundPassBytes = 16 << 20

// router decides one dispatch pass; it caches domain lookups and the messages it reads
// (one message to several local recipients is read and parsed once).
type router struct {
	s        *Service
	ctx      context.Context
	domains  map[string]bool
	messages map[int64]*routed // by message row
	bytes    int               // raw bytes of the messages read so far
}

// routed is a message a pass delivers locally: its arrival, or why it cannot arrive.
type routed struct {
	arrival *arrival
	err     error // ErrEmptyMessage, ErrScanUnavailable
}

// What becomes of a job after route.
type routeNext int

const (
	settled  routeNext = iota // the outcome is recorded with the pass
	toRelay                   // the row goes to the relay workers
	nextPass                  // left as it is for the next pass (outboundPassBytes)
)

// message reads job j's message and takes it through the receive pipeline's first steps
// (parse, scan), once per pass; it reports false when the pass has read all the bytes it
// may.
func (r *router) message(j db.OutboundJob) (*routed, bool, error) {
	if m, ok := r.messages[j.MessageRow]; ok {
		return m, true, nil
	}
	if r.bytes >= outboundPassBytes {
		return nil, false, nil
	}
	raw, err := r.s.store.MessageRaw(r.ctx, j.MessageRow)
	if err != nil {
		return nil, true, err
	}
	r.bytes += len(raw)
	m := &routed{}
	// Not deliverable when err is set, but read: the outcome is recorded with the pass.
	m.arrival, m.err = r.s.arrive(r.ctx, raw, Origin{Internal: true})
	r.messages[j.MessageRow] = m
	return m, true, nil
}

// route returns the outcome of a job it can settle at once, or what else becomes of it.
func (r *router) route(cfg OutboundConfig, j db.OutboundJob) (db.OutboundOutcome, routeNext) {
	s := r.s
	now := s.store.Now()
	if e := s.faults.Fire(FaultDelivery, FaultCase{Recipient: j.Recipient}); e != nil {
		return s.faultOutcome(cfg, j, now, e), settled
	}
	domain := strings.ToLower(j.Recipient[strings.LastIndexByte(j.Recipient, '@')+1:])
	local, ok := r.domains[domain]
	if !ok {
		var err error
		local, err = s.localDomain(r.ctx, domain)
		if err != nil {
			return s.retry(cfg, j, now, ProviderLocal, Result{Reason: "temporary local lookup failure"}), settled
		}
		r.domains[domain] = local
	}
	if !local {
		if cfg.Transport != nil {
			return db.OutboundOutcome{}, toRelay
		}
		return db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDelivered, Provider: ProviderSink,
			SMTPStatusCode: "250", SMTPEnhancedStatusCode: "2.0.0", DeliveryEventAt: db.Time{Time: now}.String(),
			DeliveryTimeMs: deliveryTime(j, now)}}, settled
	}
	inbox, err := s.localInbox(r.ctx, j.Recipient)
	switch {
	case errors.Is(err, ErrUnknownRecipient):
		return localBounce("550", "5.1.1", "unknown recipient"), settled
	case errors.Is(err, ErrRecipientRetired):
		return retiredBounce(), settled
	case errors.Is(err, ErrRecipientPending):
		return s.retry(cfg, j, now, ProviderLocal, Result{Code: "450", Enhanced: "4.2.1", Reason: "recipient mailbox setup is not finished"}), settled
	case err != nil:
		return s.retry(cfg, j, now, ProviderLocal, Result{Reason: "temporary local lookup failure"}), settled
	}
	m, ok, err := r.message(j)
	switch {
	case !ok:
		return db.OutboundOutcome{}, nextPass
	case err != nil:
		return s.retry(cfg, j, now, ProviderLocal, Result{Reason: "temporary failure reading the message"}), settled
	case errors.Is(m.err, ErrEmptyMessage):
		return localBounce("554", "5.6.0", "message could not be parsed"), settled
	case m.err != nil:
		return s.retry(cfg, j, now, ProviderLocal, Result{Code: "451", Enhanced: "4.3.0", Reason: "the message could not be scanned: " + m.err.Error()}), settled
	}
	// Stored with the outcome, in its transaction, by db.StoreMessage like any received copy.
	// The inbox may be deleted before then: the bounce is recorded instead, as if it had
	// been deleted before this pass.
	msg := s.copies(r.ctx, m.arrival, []int64{inbox}, now, "")[0]
	gone := retiredBounce()
	return db.OutboundOutcome{
		Update: db.RecipientDelivery{Status: db.RecipientDelivered, Provider: ProviderLocal, SMTPStatusCode: "250",
			SMTPEnhancedStatusCode: "2.0.0", DeliveryEventAt: db.Time{Time: now}.String(), DeliveryTimeMs: deliveryTime(j, now)},
		Local: &msg, LocalGone: &gone,
	}, settled
}

func deliveryTime(j db.OutboundJob, now time.Time) *int64 {
	if j.CreatedAt.IsZero() {
		return nil
	}
	ms := max(now.Sub(j.CreatedAt).Milliseconds(), 0)
	return &ms
}

// retiredBounce is the bounce of mail for a local inbox that was deleted.
func retiredBounce() db.OutboundOutcome {
	return localBounce("550", "5.1.1", "recipient mailbox was deleted")
}

// localBounce is a permanent failure to deliver into an inbox of this server. An address
// that does not exist is a hard bounce like any other.
func localBounce(code, enhanced, reason string) db.OutboundOutcome {
	return db.OutboundOutcome{
		Update: db.RecipientDelivery{Status: db.RecipientBounced, Provider: ProviderLocal, Reason: reason,
			SMTPStatusCode: code, SMTPEnhancedStatusCode: enhanced},
		Suppress: hardBounce(code, enhanced),
	}
}

// retry reschedules a temporarily failed delivery with exponential backoff, and gives up
// (failed) once the message has waited GiveUpAfter.
func (s *Service) retry(cfg OutboundConfig, j db.OutboundJob, now time.Time, provider string, r Result) db.OutboundOutcome {
	u := db.RecipientDelivery{Status: db.RecipientDeferred, Provider: provider, Reason: clip(r.Reason),
		SMTPStatusCode: r.Code, SMTPEnhancedStatusCode: r.Enhanced}
	if !j.CreatedAt.IsZero() && now.Sub(j.CreatedAt) >= cfg.GiveUpAfter {
		u.Status = db.RecipientFailed
		u.Reason = clip("gave up after " + cfg.GiveUpAfter.String() + " of retries; last error: " + r.Reason)
		return db.OutboundOutcome{Update: u}
	}
	at := now.Add(backoff(cfg.RetryBase, cfg.RetryMax, j.Attempts))
	return db.OutboundOutcome{Update: u, RetryAt: &at}
}

// runRelayWorker delivers relay rows one at a time until ctx ends.
func (s *Service) runRelayWorker(ctx context.Context, cfg OutboundConfig, kick chan struct{}) {
	tick := time.NewTicker(cfg.Poll)
	defer tick.Stop()
	for ctx.Err() == nil {
		job, err := s.store.ClaimRelay(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("outbound: claim relay job", "err", err)
		}
		if job == nil {
			select {
			case <-ctx.Done():
			case <-kick:
			case <-tick.C:
			}
			continue
		}
		// Another job may be waiting: let an idle worker look too.
		select {
		case kick <- struct{}{}:
		default:
		}
		s.relayOne(ctx, cfg, *job)
	}
}

// relayOne hands one job to the transport and records what happened.
func (s *Service) relayOne(ctx context.Context, cfg OutboundConfig, j db.OutboundJob) {
	raw := j.Raw
	if cfg.DKIM != nil {
		signed, err := cfg.DKIM.Sign(raw)
		if err != nil {
			s.log.Error("outbound: dkim sign; sending unsigned", "message", j.MessageID, "err", err)
		} else {
			raw = signed
		}
	}
	handedOff := false
	var handoffErr error
	handoff := func() error {
		ok, err := s.store.MarkHandoff(ctx, j.ID)
		if err == nil && !ok {
			err = errRowGone
		}
		handoffErr = err
		handedOff = err == nil
		return err
	}
	res := cfg.Transport.Deliver(ctx, Envelope{From: j.From, To: j.Recipient}, raw, handoff)
	switch {
	case ctx.Err() != nil && !handedOff, errors.Is(handoffErr, errRowGone):
		// Nothing was accepted, and nothing is recorded: a stopping server leaves the row
		// attempting (the next start makes it ready again); a deleted inbox took it along.
		return
	case res.Outcome == Abandoned:
		// The hand-off could not be recorded, so the message was not completed: try again.
		res = Result{Outcome: Deferred, Reason: "could not record the hand-off to the relay: " + res.Reason}
	}
	now := s.store.Now()
	provider := cfg.Transport.Provider()
	var o db.OutboundOutcome
	switch res.Outcome {
	case Delivered:
		o.Update = db.RecipientDelivery{Status: db.RecipientDelivered, Provider: provider, SMTPStatusCode: res.Code,
			SMTPEnhancedStatusCode: res.Enhanced, Reason: clip(res.Reason), DeliveryEventAt: db.Time{Time: now}.String(),
			DeliveryTimeMs: deliveryTime(j, now)}
	case Bounced:
		o.Update = db.RecipientDelivery{Status: db.RecipientBounced, Provider: provider, SMTPStatusCode: res.Code,
			SMTPEnhancedStatusCode: res.Enhanced, Reason: clip(res.Reason), DeliveryEventAt: db.Time{Time: now}.String()}
		o.Suppress = hardBounce(res.Code, res.Enhanced)
	case Uncertain:
		o.Update = db.RecipientDelivery{Status: db.RecipientAccepted, Provider: provider, Reason: clip(db.UncertainReason + ": " + res.Reason)}
		o.Settled = true
	default:
		o = s.retry(cfg, j, now, provider, res)
	}
	s.logOutcome(j, provider, res)
	fctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
	}
	if err := s.store.FinishOutbound(fctx, j, o); err != nil {
		s.log.Error("outbound: record relay outcome", "message", j.MessageID, "recipient", j.Recipient, "outcome", res.Outcome, "err", err)
	}
}

var errRowGone = errors.New("outbound: the queue row is gone (the inbox was deleted)")

// logSettled writes one info line for each delivery settled without the relay (a local
// inbox, the sink of the test-double mode, a refusal): the relay's are in logOutcome.
func (s *Service) logSettled(done []db.OutboundJob, outcomes []db.OutboundOutcome) {
	for i, o := range outcomes {
		if o.Update.Status == "" { // parked or rescheduled: not settled yet
			continue
		}
		s.log.Info("outbound: "+o.Update.Status, "message", done[i].MessageID, "recipient", done[i].Recipient,
			"provider", o.Update.Provider, "reason", o.Update.Reason)
	}
}

// logOutcome tells the operator what became of a delivery: one whose relay is down or
// refusing mail shows in the log, not only in each message's delivery record.
func (s *Service) logOutcome(j db.OutboundJob, provider string, res Result) {
	attrs := []any{"message", j.MessageID, "recipient", j.Recipient, "provider", provider, "code", res.Code, "reason", res.Reason}
	switch res.Outcome {
	case Delivered:
		s.log.Info("outbound: delivered", attrs...)
	case Bounced:
		s.log.Info("outbound: bounced", attrs...)
	case Uncertain:
		s.log.Warn("outbound: handed off but the relay's answer was lost; not sent again", attrs...)
	default:
		s.log.Warn("outbound: not delivered; will retry or give up by the retry schedule", attrs...)
	}
}
