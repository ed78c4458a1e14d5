package sqlite

import (
	"strconv"

	"github.com/inboxd/inboxd/db"
)

// A page token is an opaque keyset cursor (db.PageCursor), signed with a server secret
// (db.Signer.PageToken), so a client can neither forge one nor carry one over to another
// account's list.
type cursor = db.PageCursor

func (s *Store) encodeToken(scope string, ts, id int64) string {
	return s.tokens.PageToken(scope, ts, id)
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

// decodeToken returns the cursor of token, which must have been issued for scope.
// An empty token means the first page.
func (s *Store) decodeToken(token, scope string) (*cursor, error) {
	return s.tokens.DecodePageToken(token, scope)
}

// pageTokenMAC is the size of a page token's MAC in bytes (db.PageTokenMAC).
const pageTokenMAC = db.PageTokenMAC
