package schema

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// The OpenAPI document names its schemas: every resource of defs.json (an object, or a
// choice of objects) a body or response reaches is in components.schemas under its name
// ("message" as Message), and bodies and responses refer to it, so that client generators
// (openapi-typescript and the like) make named types instead of anonymous ones. Scalar
// definitions (an email address, a UUID) are written out where they are used, as are
// query and path parameters. The validator still works on the inlined copies (load.go);
// both come from the same files.

const componentRef = "#/components/schemas/"

// componentName is the component name of the definition def: "attachmentSummary" is
// AttachmentSummary.
func componentName(def string) string { return strings.ToUpper(def[:1]) + def[1:] }

// namer rewrites schemas as written into schemas of the document, noting the definitions
// they reach.
type namer struct {
	defs map[string]any  // defs.json as written
	used map[string]bool // definitions reached so far
}

// name returns a copy of raw with its references to defs.json pointing into the
// document's components, and without $comment.
func (n *namer) name(raw any) any {
	switch x := raw.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, sub := range x {
			switch k {
			case "$comment":
			case "$ref":
				def := strings.TrimPrefix(sub.(string), refPrefix)
				if !n.resource(n.defs[def]) {
					// Written out: the loader checked that no keyword beside the
					// reference replaces one of the definition's.
					for dk, dv := range n.name(n.defs[def]).(map[string]any) {
						if _, set := x[dk]; !set {
							out[dk] = dv
						}
					}
					continue
				}
				n.used[def] = true
				out[k] = componentRef + componentName(def)
			default:
				out[k] = n.name(sub)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, sub := range x {
			out[i] = n.name(sub)
		}
		return out
	}
	return raw
}

// resource reports whether a definition is named in the document: an object, or a
// choice (oneOf, anyOf) with an object among its schemas.
func (n *namer) resource(def any) bool {
	m, _ := def.(map[string]any)
	if m["type"] == "object" {
		return true
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		branches, _ := m[key].([]any)
		for _, b := range branches {
			bm, _ := b.(map[string]any)
			ref, _ := bm["$ref"].(string)
			if bm["type"] == "object" || (ref != "" && n.resource(n.defs[strings.TrimPrefix(ref, refPrefix)])) {
				return true
			}
		}
	}
	return false
}

// components returns the definitions reached so far, and the ones they reach, named.
func (n *namer) components() map[string]any {
	out := map[string]any{}
	for {
		var todo []string
		for def := range n.used {
			if _, done := out[componentName(def)]; !done {
				todo = append(todo, def)
			}
		}
		if len(todo) == 0 {
			return out
		}
		sort.Strings(todo)
		for _, def := range todo {
			out[componentName(def)] = n.name(n.defs[def])
		}
	}
}

// errorResponses are the error answers of the document (components.responses), by
// status: what each means and which codes it carries.
var errorResponses = map[int]string{
	http.StatusBadRequest:            "invalid_request: the request is malformed (JSON syntax, a query string where none is taken).",
	http.StatusUnauthorized:          "unauthorized: the key is missing, malformed, unknown, expired or revoked.",
	http.StatusPaymentRequired:       "billing_limit: the account's plan allows no more of this this month.",
	http.StatusForbidden:             "forbidden: the key may not call this (scope, mailbox key); access_denied: the account is disabled; or a quarantine rule.",
	http.StatusNotFound:              "not_found: the inbox, message, thread, attachment or other resource does not exist for this key.",
	http.StatusConflict:              "A conflict: inbox_conflict, idempotency_conflict, send_pending or webhook_limit.",
	http.StatusGone:                  "inbox_retired: the inbox was deleted; cursor_expired: the event stream cannot resume from so far back.",
	http.StatusRequestEntityTooLarge: "payload_too_large: the request body is over 5 MiB; thread_too_large: the thread is too large to return whole.",
	http.StatusUnsupportedMediaType:  "invalid_request: the body is not application/json (or another type the operation takes).",
	http.StatusUnprocessableEntity:   "invalid_argument: a field or parameter is invalid (the message names it); also inbox_limit, key_limit, domain_not_ready, invalid_reply.",
	http.StatusTooManyRequests:       "rate_limited: the inbox's sends in 24 hours reached the limit; retry after Retry-After with the same idempotencyKey.",
	http.StatusInternalServerError:   "internal_error: a bug; it is logged with its cause.",
	http.StatusServiceUnavailable:    "unavailable: storage or a dependency cannot work now (transient: retry).",
}

// errorResponseName is the name of a status's error answer in components.responses.
func errorResponseName(status int) string {
	return "Error" + strconv.Itoa(status)
}

// errorComponents is components.responses: one error answer per status, each the Error
// schema.
func errorComponents() map[string]any {
	out := map[string]any{}
	for status, desc := range errorResponses {
		out[errorResponseName(status)] = map[string]any{
			"description": desc,
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": componentRef + "Error"}}},
		}
	}
	return out
}

// opErrors are the error statuses of one operation beyond the ones every operation of
// its kind has (operationErrors).
var opErrors = map[string][]int{
	"send":           {http.StatusPaymentRequired, http.StatusConflict, http.StatusTooManyRequests},
	"reply":          {http.StatusPaymentRequired, http.StatusConflict, http.StatusTooManyRequests},
	"createInbox":    {http.StatusConflict},
	"getThread":      {http.StatusRequestEntityTooLarge},
	"createWebhook":  {http.StatusConflict},
	"streamEvents":   {http.StatusGone},
	"injectMessage":  {http.StatusGone},
	"purgeMessages":  {http.StatusGone},
	"createTestKey":  {http.StatusNotFound, http.StatusGone},
	"listOutbox":     {http.StatusNotFound},
	"revokeTestKey":  {http.StatusNotFound},
	"disableAccount": {http.StatusNotFound},
	"enableAccount":  {http.StatusNotFound},
}

// operationErrors are the error statuses op answers, in order: what every operation may
// answer, what its path, body and key bring, and its own.
func operationErrors(op Operation) []int {
	set := map[int]bool{http.StatusBadRequest: true, http.StatusUnprocessableEntity: true,
		http.StatusInternalServerError: true, http.StatusServiceUnavailable: true}
	if !op.Control {
		set[http.StatusUnauthorized], set[http.StatusForbidden] = true, true
	}
	if len(op.PathParams) > 0 {
		set[http.StatusNotFound] = true
	}
	if contains(op.PathParams, "inboxId") && !op.Control {
		set[http.StatusGone] = true
	}
	if op.Method != "GET" && op.Method != "DELETE" {
		set[http.StatusRequestEntityTooLarge], set[http.StatusUnsupportedMediaType] = true, true
	}
	for _, s := range opErrors[op.ID] {
		set[s] = true
	}
	out := make([]int, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}
