package db

import (
	"context"
	"time"
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
	Attempts int // failed provider attempts so far
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
type TriageOutcome struct {
	MessageRow int64
	Result     *Triage
	RetryAt    time.Time
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
