package db

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
)

// ListScope is what a page token is bound to: a short hash of the parts that name a list
// (the kind of list, the inbox or account, the filters), so a token of one list is refused
// by another.
func ListScope(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

// PageCursor is what a page token carries: the sort key (timestamp, row id) of the last
// item returned, bound to the list it came from (Scope, ListScope).
type PageCursor struct {
	Scope string `json:"s"`
	TS    int64  `json:"t"`
	ID    int64  `json:"i"`
}

// PageTokenMAC is the size of a page token's MAC in bytes: 128 bits keep forgery out of
// reach and the token short.
const PageTokenMAC = 16

// PageToken returns the opaque token of the page after the item (ts, id) of the list
// scope: the cursor, signed, so a client can neither forge one nor carry one over to
// another account's list.
func (s Signer) PageToken(scope string, ts, id int64) string {
	payload, _ := json.Marshal(PageCursor{Scope: scope, TS: ts, ID: id})
	return s.SealToken("", payload)
}

// CutPage ends a page of a list whose query asked for one row more than limit (which
// tells whether another page follows): it drops that row and returns the token of the next
// page, "" on the last one. key gives a row's (ts, id), the cursor the next page starts
// after.
func CutPage[T any](s Signer, scope string, rows []T, limit int, key func(T) (ts, id int64)) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	ts, id := key(rows[limit-1])
	return rows, s.PageToken(scope, ts, id)
}

// DecodePageToken returns the cursor of token, which must have been issued for scope; ""
// is the first page (nil).
//
// Errors: invalid_argument (naming pageToken).
func (s Signer) DecodePageToken(token, scope string) (*PageCursor, error) {
	if token == "" {
		return nil, nil
	}
	bad := Errorf(ECodeInvalidArgument, "pageToken: invalid page token")
	payload, ok := s.OpenToken("", token)
	if !ok {
		return nil, bad
	}
	var c PageCursor
	if err := json.Unmarshal(payload, &c); err != nil || c.Scope != scope {
		return nil, bad
	}
	return &c, nil
}

// SealToken makes a token of payload: the payload and a MAC of domain and payload, both
// base64url, joined by a dot. domain keeps the tokens of one kind from being taken for
// another's.
func (s Signer) SealToken(domain string, payload []byte) string {
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(s.Sign([]byte(domain), payload))
}

// OpenToken returns the payload of a token sealed for domain, or false if it is malformed
// or its MAC does not match.
func (s Signer) OpenToken(domain, token string) ([]byte, bool) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return nil, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !s.Verify(got, []byte(domain), payload) {
		return nil, false
	}
	return payload, true
}
