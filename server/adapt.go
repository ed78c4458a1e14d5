package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/schema"
)

// call is a request that passed the common checks: authenticated, allowed, with its
// path decoded and validated, its inbox resolved, and its query and body validated.
type call struct {
	op     schema.Operation
	who    *db.Principal
	inbox  *db.Inbox         // the {inboxId} inbox, when the path has one
	params map[string]string // decoded path parameters
	query  map[string]any    // validated query with defaults
	body   []byte            // validated JSON body ({} when empty)
	raw    []byte            // the body as sent, for an operation that takes one (Operation.RawBody)

	release func() // gives back the body's share of the memory budget (nil: none taken)
}

// handler serves one operation. It returns errors instead of writing them, so error
// responses have a single writer.
type handler func(w http.ResponseWriter, r *http.Request, c *call) error

// mailboxOps are the operations a mailbox key may call (API-NOTES section 1); scopes are
// not checked for mailbox keys, this allow-list is what limits them.
var mailboxOps = map[string]bool{
	"getInbox": true, "listInboxes": true, "listMessages": true, "searchMessages": true, "getMessage": true,
	"getAttachment": true, "send": true, "reply": true, "updateMessageLabels": true, "listThreads": true,
	"getThread": true, "updateThreadLabels": true,
	"streamEvents": true, "waitForMessages": true, // limited to the key's inbox, as the rest
}

// adapt runs the checks every operation shares, in the documented order (API-NOTES
// section 1): authenticate, check scope, decode the path, parse query and body, validate,
// then dispatch.
func (s *Server) adapt(op schema.Operation, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := s.prepare(op, r)
		if err == nil {
			err = s.apiFault(r, op.ID)
		}
		if err == nil {
			err = h(w, r, c)
		}
		if c != nil && c.release != nil {
			c.release()
		}
		if err != nil {
			writeError(w, err, s.log)
		}
	}
}

func (s *Server) prepare(op schema.Operation, r *http.Request) (*call, error) {
	ctx := r.Context()
	c := &call{op: op, params: map[string]string{}}
	var err error
	if !op.Control { // the test controls need no key (controls.go)
		if err := s.authorize(r, c); err != nil {
			return nil, err
		}
	}
	for _, p := range httprouter.ParamsFromContext(ctx) {
		v, err := url.PathUnescape(p.Value)
		if err != nil {
			return nil, db.Errorf(db.ECodeInvalidRequest, "%s: bad percent-encoding in the path", p.Key)
		}
		if err := s.schema.Path(p.Key, v); err != nil {
			return nil, err
		}
		if p.Key == "threadId" || p.Key == "attachmentId" {
			v = strings.ToLower(v) // UUIDs are read case-insensitively (RFC 9562) and kept lower case
		}
		c.params[p.Key] = v
	}
	if id, ok := c.params["inboxId"]; ok {
		if c.inbox, err = s.resolveInbox(r, c.who, id); err != nil {
			return nil, err
		}
	}
	if err := s.parseQuery(r, c); err != nil {
		return nil, err
	}
	if op.RawBody != "" && mediaType(r) == op.RawBody {
		c.raw, c.release, err = s.readLimited(r)
		return c, err
	}
	if r.Method != http.MethodGet {
		if c.body, c.release, err = s.readBody(r, op.RawBody); err != nil {
			return nil, err
		}
		if op.ID == "send" || op.ID == "reply" {
			if c.body, err = mergeIdempotencyHeader(r, c.body); err != nil {
				return nil, err
			}
		}
		if err := s.schema.Body(op.ID, c.body); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// authorize authenticates the request's key and checks that it may call c's operation.
func (s *Server) authorize(r *http.Request, c *call) error {
	var err error
	if c.who, err = s.authenticate(r); err != nil {
		return err
	}
	if c.who.Mailbox && !mailboxOps[c.op.ID] {
		return db.Errorf(db.ECodeForbidden, "a mailbox key cannot call %s", c.op.ID)
	}
	if !c.who.Mailbox && !c.who.HasScope(c.op.Scope) {
		return db.Errorf(db.ECodeForbidden, "this key lacks the %s scope that %s needs", c.op.Scope, c.op.ID)
	}
	return nil
}

func (s *Server) authenticate(r *http.Request) (*db.Principal, error) {
	token, err := bearerToken(r)
	if err != nil {
		return nil, err
	}
	return s.store.Authenticate(r.Context(), token)
}

// bearerToken returns the key of the Authorization header.
func bearerToken(r *http.Request) (string, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", db.Errorf(db.ECodeUnauthorized, "missing or invalid API key: send Authorization: Bearer <key>")
	}
	return strings.TrimSpace(token), nil
}

// resolveInbox finds the path's inbox as the caller may see it: a mailbox key reaches only
// its own inbox (403 otherwise, whether or not the other exists); an account key reaches
// its account's inboxes (404 for anyone else's, so nothing leaks).
func (s *Server) resolveInbox(r *http.Request, who *db.Principal, address string) (*db.Inbox, error) {
	if who == nil { // a test control: any account's inbox
		in, err := s.store.LocalInbox(r.Context(), address)
		if err == nil && in.Retired {
			return nil, retired(in)
		}
		return in, err
	}
	if who.Mailbox {
		own, err := s.store.InboxByRowID(r.Context(), who.InboxID)
		if err != nil {
			return nil, err
		}
		if !strings.EqualFold(own.Address, address) {
			return nil, db.Errorf(db.ECodeForbidden, "a mailbox key reaches only its own inbox")
		}
		if own.Retired {
			return nil, retired(own)
		}
		return own, nil
	}
	return s.store.InboxByAddress(r.Context(), who.AccountID, address)
}

// retired is the answer to a call on a deleted inbox.
func retired(in *db.Inbox) error {
	return db.Errorf(db.ECodeInboxRetired, "inbox %s was deleted", in.Address)
}

func (s *Server) parseQuery(r *http.Request, c *call) error {
	if r.Method != http.MethodGet {
		if r.URL.RawQuery != "" {
			return db.Errorf(db.ECodeInvalidRequest, "%s takes no query string", c.op.ID)
		}
		return nil
	}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return db.Errorf(db.ECodeInvalidRequest, "query: bad percent-encoding or syntax")
	}
	c.query, err = s.schema.Query(c.op.ID, values)
	return err
}

// readBody reads a JSON body of at most MaxBodyBytes (readLimited); an empty one is {}.
// raw is the other media type the operation takes ("" when none), for the refusal.
func (s *Server) readBody(r *http.Request, raw string) ([]byte, func(), error) {
	if r.Body == nil { // only in-process callers build requests without one
		return []byte("{}"), nil, nil
	}
	body, release, err := s.readLimited(r)
	if err != nil {
		return nil, nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return []byte("{}"), release, nil
	}
	if err := plainJSON(r, raw); err != nil {
		release()
		return nil, nil, err
	}
	return body, release, nil
}

// httpBudgetWait is how long a request body waits for its share of the memory budget
// before the request is answered 503: an API client retries a transient error at once,
// so it is not kept waiting as long as an SMTP sender.
const httpBudgetWait = 2 * time.Second

// readLimited reads a request body of at most MaxBodyBytes: the size is checked before
// reading, and the body takes its share of the memory budget (the whole limit when it
// comes without a Content-Length) until the returned func is called, once the request is
// handled.
func (s *Server) readLimited(r *http.Request) ([]byte, func(), error) {
	tooLarge := db.Errorf(db.ECodePayloadTooLarge, "request body is larger than %d bytes", MaxBodyBytes)
	if r.ContentLength > MaxBodyBytes {
		return nil, nil, tooLarge
	}
	share := r.ContentLength
	if share < 0 {
		share = MaxBodyBytes
	}
	release, err := s.cfg.Budget.Acquire(r.Context(), share, httpBudgetWait)
	if err != nil {
		return nil, nil, &db.Error{Code: db.ECodeUnavailable, Transient: true, Cause: err, RetryAfter: time.Second,
			Message: "the server is busy with other large requests and mail; retry shortly"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		err = tooLarge
	case err != nil:
		err = db.Errorf(db.ECodeInvalidRequest, "request body could not be read")
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return body, release, nil
}

// mediaType is the request's Content-Type without parameters, "" when it has none.
func mediaType(r *http.Request) string {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt
}

// plainJSON checks that the request says its body is JSON (parameters such as charset
// allowed) and sent without a content coding. A gzip body would otherwise reach the
// validator as bytes that are not UTF-8, a 400 that hides the cause; a coding the server
// does not take is a 415 (RFC 7694). raw is another media type the operation takes ("":
// none), named in the refusal.
func plainJSON(r *http.Request, raw string) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		if raw != "" {
			return db.Errorf(db.ECodeUnsupportedMedia, "Content-Type must be application/json or %s", raw)
		}
		return db.Errorf(db.ECodeUnsupportedMedia, "Content-Type must be application/json")
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return db.Errorf(db.ECodeUnsupportedMedia, "Content-Encoding %s is not accepted: send the body uncompressed", c)
			}
		}
	}
	return nil
}

// mergeIdempotencyHeader lets the Idempotency-Key header stand in for the body field. When
// both are given they must agree. The key is written in as the body's first member and the
// rest is kept byte for byte, so the validator sees what the client sent (a re-encoded
// map would have dropped a repeated key, which must be refused).
func mergeIdempotencyHeader(r *http.Request, body []byte) ([]byte, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return body, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return body, nil // the validator reports the syntax error
	}
	if raw, ok := obj["idempotencyKey"]; ok {
		var inBody string
		if json.Unmarshal(raw, &inBody) != nil || inBody != key {
			return nil, db.Errorf(db.ECodeInvalidRequest, "Idempotency-Key header and idempotencyKey differ: conflicting idempotency keys")
		}
		return body, nil
	}
	value, _ := json.Marshal(key)
	rest := body[bytes.IndexByte(body, '{')+1:] // an object: after any spaces, { comes first
	merged := append(append([]byte(`{"idempotencyKey":`), value...), ',')
	if len(obj) == 0 {
		merged = merged[:len(merged)-1] // {} has no member to separate from
	}
	return append(merged, rest...), nil
}

// queryInt and friends read validated query values; the validator applied defaults.
func (c *call) queryInt(name string) int {
	v, _ := c.query[name].(int)
	return v
}

func (c *call) queryString(name string) string {
	v, _ := c.query[name].(string)
	return v
}

func (c *call) queryBool(name string) bool {
	v, _ := c.query[name].(bool)
	return v
}

func (c *call) queryStrings(name string) []string {
	v, _ := c.query[name].([]string)
	return v
}

func (c *call) has(name string) bool {
	_, ok := c.query[name]
	return ok
}

// decode unmarshals the validated body into v.
func (c *call) decode(v any) error {
	if err := json.Unmarshal(c.body, v); err != nil {
		return db.Errorf(db.ECodeInvalidArgument, "body: %v", err)
	}
	return nil
}
