package postgres

import (
	"strconv"

	"github.com/inboxd/inboxd/db"
)

// Page tokens are db.PageCursor values signed by db.Signer (s.tokens); here is the SQL of
// a page.

// sqlArgs are the arguments of a query being built, numbered as they are added.
type sqlArgs []any

// add appends v and returns its placeholder ($n).
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// keyset is the end of a page query over the (ts, id) columns: the rows after cursor c
// (nil on the first page), in that order (newest first when desc), and one row more than
// the page, which tells whether another page follows.
func keyset(ts, id string, desc bool, c *db.PageCursor, limit int, args *sqlArgs) string {
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	var q string
	if c != nil {
		q = " AND (" + ts + ", " + id + ") " + cmp + " (" + args.add(c.TS) + ", " + args.add(c.ID) + ")"
	}
	return q + " ORDER BY " + ts + dir + ", " + id + dir + " LIMIT " + strconv.Itoa(limit+1)
}
