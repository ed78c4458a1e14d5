package db

import (
	"time"
)

// SuppressedReason is the reason a send records for a recipient on the suppression list
// (API-NOTES section 10).
const SuppressedReason = "Recipient is suppressed"

// Suppression is one address an inbox no longer sends to, because it hard-bounced.
type Suppression struct {
	Address      string
	Reason       string
	SMTPCode     string
	SMTPEnhanced string
	CreatedAt    time.Time
}
