package server

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/schema"
)

// statusOf is the one table from error code to HTTP status.
var statusOf = map[string]int{
	db.ECodeInvalidRequest:     http.StatusBadRequest,
	db.ECodeUnsupportedMedia:   http.StatusUnsupportedMediaType,
	db.ECodeInvalidArgument:    http.StatusUnprocessableEntity,
	db.ECodeInvalidReply:       http.StatusUnprocessableEntity,
	db.ECodeInboxLimit:         http.StatusUnprocessableEntity,
	db.ECodeKeyLimit:           http.StatusUnprocessableEntity,
	db.ECodeDomainNotReady:     http.StatusUnprocessableEntity,
	db.ECodeUnauthorized:       http.StatusUnauthorized,
	db.ECodeBillingLimit:       http.StatusPaymentRequired,
	db.ECodeForbidden:          http.StatusForbidden,
	db.ECodeAccessDenied:       http.StatusForbidden,
	db.ECodeQuarantineReview:   http.StatusForbidden,
	db.ECodeMessageQuarantined: http.StatusForbidden,
	db.ECodeNotFound:           http.StatusNotFound,
	db.ECodeMethodNotAllowed:   http.StatusMethodNotAllowed,
	db.ECodeInboxRetired:       http.StatusGone,
	db.ECodeCursorExpired:      http.StatusGone,
	db.ECodeWebhookLimit:       http.StatusConflict,
	db.ECodeInboxConflict:      http.StatusConflict,
	db.ECodeIdempotency:        http.StatusConflict,
	db.ECodeSendPending:        http.StatusConflict,
	"domain_conflict":          http.StatusConflict,
	db.ECodePayloadTooLarge:    http.StatusRequestEntityTooLarge,
	db.ECodeThreadTooLarge:     http.StatusRequestEntityTooLarge,
	db.ECodeRateLimited:        http.StatusTooManyRequests,
	db.ECodeUnavailable:        http.StatusServiceUnavailable,
	db.ECodeInternal:           http.StatusInternalServerError,
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Transient bool   `json:"transient"`
}

// asClientError turns any error into the code, status and client-safe message the client
// sees. Anything that is not one of our error types is internal_error, and its cause is
// logged, never shown.
func asClientError(err error, log *slog.Logger) (int, *db.Error) {
	var fe *faultError
	if errors.As(err, &fe) { // the test controls chose the status
		return fe.status, &fe.e
	}
	var se *schema.Error
	if errors.As(err, &se) {
		code := db.ECodeInvalidArgument
		if se.Syntax {
			code = db.ECodeInvalidRequest
		}
		return statusOf[code], &db.Error{Code: code, Message: se.Message}
	}
	var e *db.Error
	if errors.As(err, &e) {
		status, ok := statusOf[e.Code]
		if !ok {
			status = http.StatusBadRequest
		}
		if e.Code == db.ECodeUnsupportedMedia {
			return status, &db.Error{Code: db.ECodeInvalidRequest, Message: e.Message}
		}
		if status >= 500 {
			log.Error("request failed", "code", e.Code, "err", err)
		}
		return status, e
	}
	log.Error("internal error", "err", err)
	return http.StatusInternalServerError, &db.Error{Code: db.ECodeInternal, Message: "internal error", Transient: true}
}

// writeError is the only writer of error responses.
func writeError(w http.ResponseWriter, err error, log *slog.Logger) {
	status, e := asClientError(err, log)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.RetryAfter.Seconds()+0.999)))
	}
	writeJSON(w, status, errorBody{errorDetail{Code: e.Code, Message: e.Message, Transient: e.Transient}})
}
