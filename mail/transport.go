package mail

import (
	"context"
	"strings"
	"time"
)

// Providers recorded on delivery records.
const (
	ProviderLocal = "local" // an inbox on this server
	ProviderRelay = "relay" // the operator's SMTP relay (--relay)
	ProviderSink  = "sink"  // no relay configured: the test-double mode
)

// OutboundConfig is how sent mail leaves for recipients that are not on this server.
type OutboundConfig struct {
	// Transport delivers to recipients elsewhere. Nil means the sink: the test-double mode
	// in which such recipients are recorded `delivered` with provider "sink" and nothing
	// leaves the machine.
	Transport Transport
	// DKIM signs mail handed to Transport; nil sends it unsigned.
	DKIM *DKIM
	// Workers is how many deliveries Transport runs at once (default 4).
	Workers int
	// RetryBase is the wait before the first retry of a deferred delivery (default 30 s);
	// it doubles with every attempt up to RetryMax (default 1 h).
	RetryBase, RetryMax time.Duration
	// GiveUpAfter is how long a deferred recipient is retried before it is recorded
	// `failed` (default 5 days, as common MTAs do).
	GiveUpAfter time.Duration
	// Poll is how often the worker looks for retries that came due (default 1 s).
	Poll time.Duration
}

func (c OutboundConfig) withDefaults() OutboundConfig {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 30 * time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Hour
	}
	if c.GiveUpAfter <= 0 {
		c.GiveUpAfter = 5 * 24 * time.Hour
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	return c
}

// Transport hands messages to the world outside this server.
type Transport interface {
	// Provider is the name delivery records show (ProviderRelay).
	Provider() string
	// Deliver sends raw to one recipient. It calls handoff once the whole message is
	// written and right before the step after which the remote side may have accepted it
	// (the end-of-data dot); if handoff fails, Deliver must abandon the message without
	// completing it and return Abandoned.
	Deliver(ctx context.Context, env Envelope, raw []byte, handoff func() error) Result
}

// Envelope is the SMTP envelope of one delivery.
type Envelope struct {
	From string // MAIL FROM: the sending inbox
	To   string // RCPT TO: one recipient
}

// Outcomes of Transport.Deliver.
const (
	Delivered = "delivered" // the remote accepted the message (2xx after the data)
	Deferred  = "deferred"  // temporary failure, nothing accepted: retry later
	Bounced   = "bounced"   // permanent rejection
	Uncertain = "uncertain" // the message was handed off but the answer was lost: do not resend
	Abandoned = "abandoned" // handoff refused (the queue row is gone): nothing to record
)

// Result is what one delivery attempt found.
type Result struct {
	Outcome  string
	Code     string // SMTP reply code, e.g. "550"; "" when the remote never answered
	Enhanced string // enhanced status code, e.g. "5.1.1"
	Reason   string // the remote's text or the local cause, at most 512 characters
}

// hardBounce reports whether a permanent failure says the address itself is bad, so the
// inbox should stop sending to it (API-NOTES section 10): RFC 3463 class 5.1.x (bad
// mailbox or domain) and 5.2.1 (mailbox disabled), or, from a server without enhanced
// codes, 550, 551 and 553. Policy and content refusals (5.7.x, 5.6.x, 5.3.4) are not.
func hardBounce(code, enhanced string) bool {
	if enhanced != "" {
		return strings.HasPrefix(enhanced, "5.1.") || enhanced == "5.2.1"
	}
	return code == "550" || code == "551" || code == "553"
}

// backoff is the wait before retry number attempts+1: base doubled per attempt, capped.
func backoff(base, max time.Duration, attempts int) time.Duration {
	d := base
	for i := 0; i < attempts && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// clip bounds a reason to the 512 characters the delivery record allows.
func clip(s string) string {
	s = strings.Join(strings.Fields(Clean(s)), " ")
	if r := []rune(s); len(r) > 512 {
		return string(r[:511]) + "…"
	}
	return s
}
