package db

import (
	"errors"
	"fmt"
	"time"
)

// Error codes a client can see. The HTTP status of each lives in one table in the server
// package; everything else that fails is internal_error.
const (
	ECodeInvalidRequest     = "invalid_request"
	ECodeInvalidArgument    = "invalid_argument"
	ECodeInvalidReply       = "invalid_reply"
	ECodeUnauthorized       = "unauthorized"
	ECodeForbidden          = "forbidden"
	ECodeAccessDenied       = "access_denied"
	ECodeNotFound           = "not_found"
	ECodeMethodNotAllowed   = "method_not_allowed" // /mcp only: /v1 answers not_found
	ECodeInboxRetired       = "inbox_retired"
	ECodeInboxConflict      = "inbox_conflict"
	ECodeInboxLimit         = "inbox_limit"
	ECodeKeyLimit           = "key_limit"
	ECodeBillingLimit       = "billing_limit"
	ECodeIdempotency        = "idempotency_conflict"
	ECodeSendPending        = "send_pending"
	ECodeRateLimited        = "rate_limited"
	ECodeQuarantineReview   = "quarantine_review_required"
	ECodeMessageQuarantined = "message_quarantined"
	ECodePayloadTooLarge    = "payload_too_large"
	ECodeUnsupportedMedia   = "unsupported_media_type" // sent as invalid_request 415
	ECodeThreadTooLarge     = "thread_too_large"
	ECodeDomainNotReady     = "domain_not_ready"
	ECodeUnavailable        = "unavailable"    // storage cannot take writes now (disk full, read-only)
	ECodeCursorExpired      = "cursor_expired" // a stream resumed from before what the event log keeps
	ECodeWebhookLimit       = "webhook_limit"  // an account has the most webhooks it may
	ECodeInternal           = "internal_error"
)

// Error is the one error type that carries a client-safe failure. Message is shown to the
// client; Cause is logged and never shown.
type Error struct {
	Code      string
	Message   string
	Transient bool
	// RetryAfter, when set, tells the client when a retry can succeed (rate limits).
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Code + ": " + e.Message + ": " + e.Cause.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns a non-transient client error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the client code of err, or internal_error when err is not an *Error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ECodeInternal
}

// IsCode reports whether err carries the given client code.
func IsCode(err error, code string) bool { return err != nil && ErrorCode(err) == code }
