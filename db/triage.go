package db

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"
)

// The triage queue (migration 0004): received mail waits here for analysis. A message
// enters it in the transaction that stores it and leaves it in the one that stores its
// result, so a crash or restart loses nothing and resumes the rest.

// TriageJob is a message to analyze, with the fields a triage provider may see (API-NOTES
// section 8: no HTML, attachments or Bcc).
type TriageJob struct {
	MessageRow int64
	AccountID  string
	MessageID  string
	From       string
	To, Cc     []string
	Subject    string
	ReceivedAt time.Time
	// Text is the plain body cut to TriageTextChars+1 characters: enough to tell whether
	// the model input was cut.
	Text     string
	Signals  TriageSignals // kept on the queue with the message (NewMessage.TriageSignals)
	Attempts int           // failed provider attempts so far
	// LeaseEnds is when the claim's lease ends, after which another process may claim the
	// message (zero: the store leases nothing, its one process works the queue alone).
	LeaseEnds time.Time
}

// TriageSignals are what a triage provider may know of a message besides its words: the
// header fields that tell bulk and automated mail from a person's (TriageHeaderNames) and
// whether the message answers mail its inbox sent. mail sets them on received mail; a store
// keeps them with the message's triage queue row (SQLite: one JSON column) and gives them
// back in TriageJob, so a message analyzed later (by the worker, or after a quarantine
// release) is seen as one analyzed on arrival.
type TriageSignals struct {
	// Headers maps each of TriageHeaderNames the message carries (canonical name) to its
	// value, unfolded and cut to TriageHeaderChars bytes.
	Headers map[string]string `json:"headers,omitempty"`
	// RepliesToOurs: the message's In-Reply-To (or, without one, its last References
	// entry) is the Message-ID of mail its inbox sent (ReplyParents, Store.SentAny).
	RepliesToOurs bool `json:"repliesToOurs,omitempty"`
}

// TriageHeaderNames are the header fields triage reads, in canonical form: list and bulk
// mail (List-*, Precedence, bulk senders' own marks), automated mail (Auto-Submitted and
// the auto-reply marks), and a thread's position and answer address.
var triageHeaderNames = []string{
	"Auto-Submitted", "Feedback-Id", "In-Reply-To", "List-Id", "List-Unsubscribe", "List-Unsubscribe-Post",
	"Precedence", "Reply-To", "X-Auto-Response-Suppress", "X-Autoreply", "X-Autorespond", "X-Campaign-Id",
	"X-Mailer", "X-Mailgun-Sid", "X-Mc-User", "X-Ses-Outgoing", "X-Sg-Eid",
}

// TriageHeaderNames returns the header fields triage reads, in canonical MIME form
// (textproto.CanonicalMIMEHeaderKey), sorted.
func TriageHeaderNames() []string { return append([]string(nil), triageHeaderNames...) }

// TriageHeaderChars bounds a header value kept for triage: enough for a List-Id or a
// mailer's name, not a tracking URL's tail.
const TriageHeaderChars = 200

// ClipBytes cuts s to at most n bytes on a character boundary.
func ClipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ReplyParents are the Message-IDs a message answers: those of its In-Reply-To, else the
// last of its References (a client that keeps References and drops In-Reply-To).
func ReplyParents(inReplyTo string, references []string) []string {
	if ids := ThreadCandidates(nil, inReplyTo); len(ids) > 0 {
		return ids
	}
	if len(references) > 0 {
		return ThreadCandidates(references[len(references)-1:], "")
	}
	return nil
}

// TriageTextChars is how much of a body the model reads (API-NOTES section 8).
const TriageTextChars = 32768

// QueuesTriage reports whether a new message goes on the triage queue: received mail that
// arrived live (not loaded from a fixture, which keeps the verdict it chose) with triage
// pending.
func (n *NewMessage) QueuesTriage() bool {
	return n.QueueTriage && n.Direction == Received && n.Triage != nil && n.Triage.Status == TriagePending
}

// TriageOutcome is what became of one analysis: a result (complete or failed) that takes
// the message off the queue, or, when Result is nil, another attempt due at RetryAt.
//
// An outcome belongs to the claim whose analysis it is (TriageJob.Outcome) and is stored
// only while that claim holds: the message is still queued, and, in a store whose claims
// lease, still leased to that claim (LeaseEnds), not claimed again since by a process that
// took it over when the lease ran out. The claim's owner may record it after the lease's
// end as long as no one has claimed the message since.
type TriageOutcome struct {
	MessageRow int64
	LeaseEnds  time.Time // the claim's (TriageJob.LeaseEnds)
	Result     *Triage
	RetryAt    time.Time
}

// Outcome starts the outcome of an analysis of j, as j's claim.
func (j TriageJob) Outcome() TriageOutcome {
	return TriageOutcome{MessageRow: j.MessageRow, LeaseEnds: j.LeaseEnds}
}

// CheckTriageOutcomes refuses outcomes a store cannot record: a result is complete or
// failed (pending is what a queued message has already).
func CheckTriageOutcomes(outcomes []TriageOutcome) error {
	for _, o := range outcomes {
		if o.Result != nil && o.Result.Status != TriageComplete && o.Result.Status != TriageFailed {
			return errors.New("db: a triage result is complete or failed")
		}
	}
	return nil
}

// QueuedTriage is a due message of the triage queue, and whether its analysis is paid for
// already (a retry is not charged again).
type QueuedTriage struct {
	Job     TriageJob // without Text: TriageTexts reads it after the claim
	Charged bool
}

// ClaimTriage returns up to limit queued messages that are due at now and not
// quarantined, leaving out the rows in skip (the ones being analyzed). Starting an
// analysis spends a triage unit of the message's account, once per message; when the
// allowance is spent the message is not analyzed, its triage becomes absent (API-NOTES
// section 8) and it is not returned.
func ClaimTriage(ctx context.Context, st interface {
	Units
	TriageQueue
}, now time.Time, limit int, skip []int64) ([]TriageJob, error) {
	var jobs []TriageJob
	err := st.Update(ctx, func(tx Tx) error {
		due, err := tx.DueTriage(now, limit, skip)
		if err != nil {
			return err
		}
		jobs = jobs[:0]
		for _, q := range due {
			paid, err := chargeClaim(tx, q, now)
			if err != nil {
				return err
			}
			if paid {
				jobs = append(jobs, q.Job)
			}
		}
		return nil
	})
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	// The bodies are read after the claim commits, so that unpacking them does not hold
	// the store's writer.
	return st.TriageTexts(ctx, jobs)
}

// chargeClaim spends the triage unit of a claimed message, or drops it from the queue
// with no triage when the allowance is spent; it reports whether the analysis may start.
func chargeClaim(tx Tx, q QueuedTriage, now time.Time) (bool, error) {
	if q.Charged {
		return true, nil
	}
	err := Charge(tx, q.Job.AccountID, FeatureTriage, now)
	if IsCode(err, ECodeBillingLimit) {
		return false, tx.SkipTriage(q.Job.MessageRow)
	}
	if err != nil {
		return false, err
	}
	return true, tx.MarkTriageCharged(q.Job.MessageRow, BillingPeriod(now))
}
