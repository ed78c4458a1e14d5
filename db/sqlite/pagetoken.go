package sqlite

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// A page token is an opaque keyset cursor: the sort key of the last item returned, bound
// to the list it came from (account, inbox, filters) and signed with a server secret, so a
// client can neither forge one nor carry one over to another account's list.
type cursor struct {
	Scope string `json:"s"` // hash of what the list is bound to
	TS    int64  `json:"t"`
	ID    int64  `json:"i"`
}

func (s *Store) encodeToken(scope string, ts, id int64) string {
	payload, _ := json.Marshal(cursor{Scope: scope, TS: ts, ID: id})
	return s.signToken("", payload)
}

// keyset is the end of a page query over the (ts, id) columns: the rows after cursor c
// (nil on the first page), in that order (newest first when desc), and one row more than
// the page, which tells whether another page follows. It returns the SQL and its
// arguments.
func keyset(ts, id string, desc bool, c *cursor, limit int) (string, []any) {
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	var q string
	var args []any
	if c != nil {
		q = " AND (" + ts + ", " + id + ") " + cmp + " (?, ?)"
		args = []any{c.TS, c.ID}
	}
	return q + " ORDER BY " + ts + dir + ", " + id + dir + " LIMIT " + strconv.Itoa(limit+1), args
}

// cutPage drops the extra row keyset asked for and returns the token of the next page,
// "" on the last one; key gives a row's (ts, id).
func cutPage[T any](s *Store, scope string, rows []T, limit int, key func(T) (ts, id int64)) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	ts, id := key(rows[limit-1])
	return rows, s.encodeToken(scope, ts, id)
}

// decodeToken returns the cursor of token, which must have been issued for scope.
// An empty token means the first page.
func (s *Store) decodeToken(token, scope string) (*cursor, error) {
	if token == "" {
		return nil, nil
	}
	bad := db.Errorf(db.ECodeInvalidArgument, "pageToken: invalid page token")
	payload, ok := s.openToken("", token)
	if !ok {
		return nil, bad
	}
	var c cursor
	if err := json.Unmarshal(payload, &c); err != nil || c.Scope != scope {
		return nil, bad
	}
	return &c, nil
}

// pageTokenMAC is the size of a page token's MAC in bytes: 128 bits keep forgery out of
// reach and the token short.
const pageTokenMAC = 16

// signToken makes a token of payload: the payload and a MAC of domain and payload keyed
// with the server secret, both base64url, joined by a dot. domain keeps the tokens of one
// kind from being taken for another's.
func (s *Store) signToken(domain string, payload []byte) string {
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(s.tokens.Sign([]byte(domain), payload))
}

// openToken returns the payload of a token signed for domain, or false if it is malformed
// or its MAC does not match.
func (s *Store) openToken(domain, token string) ([]byte, bool) {
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return nil, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !s.tokens.Verify(got, []byte(domain), payload) {
		return nil, false
	}
	return payload, true
}
