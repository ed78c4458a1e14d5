package db

import (
	"time"
)

// SendWindow is the rolling window of the per-inbox send limit.
const SendWindow = 24 * time.Hour

// SendRequest is a composed outgoing message with what makes it idempotent.
type SendRequest struct {
	AccountID      string
	IdempotencyKey string
	Fingerprint    []byte // SHA-256 of the normalized request
	Message        NewMessage
	Recipients     []string // deduplicated union of to, cc and bcc: one queue row each
	RateLimit      int      // sends per inbox per SendWindow
}

// SendResult answers a send or reply.
type SendResult struct {
	MessageID    string `json:"messageId"`
	ThreadID     string `json:"threadId"`
	Deduplicated bool   `json:"deduplicated,omitempty"`
}

// OutboundJob is one recipient of a sent message waiting for delivery.
type OutboundJob struct {
	ID         int64
	MessageRow int64
	InboxID    int64
	MessageID  string
	Recipient  string
	Attempts   int
	Raw        []byte    // the message, from ClaimRelay; ClaimOutbound leaves it nil (MessageRaw)
	From       string    // the sending inbox's address: the envelope sender
	CreatedAt  time.Time // when the send was committed
}

// OutboundOutcome is what one delivery attempt found.
type OutboundOutcome struct {
	// Update is the recipient's new state (Recipient and UpdatedAt are filled in); an
	// empty Status leaves the record as it is.
	Update RecipientDelivery
	// What becomes of the queue row: Park holds it until a transport for it exists; else a
	// terminal Update.Status (or Settled) removes it; else RetryAt reschedules it.
	RetryAt *time.Time
	Park    bool
	// Settled removes the row although Update.Status is not terminal: the outcome is
	// unknown and trying again could deliver the message twice.
	Settled bool
	// Suppress puts the recipient on the sending inbox's suppression list (a hard bounce).
	Suppress bool
	// Local, when set, is the copy stored in a local recipient inbox in the same
	// transaction, so a crash cannot deliver it without recording it, or the reverse.
	Local *NewMessage
	// LocalGone is what is recorded instead when Local's inbox was deleted after the
	// delivery was routed (StoreLocal); without it the outcome fails as StoreMessage does.
	LocalGone *OutboundOutcome
}
