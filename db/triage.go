package db

import (
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
