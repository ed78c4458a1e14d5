package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/inboxd/inboxd/db"
)

// FuzzPageToken: a page token is the one piece of server state a client hands back, so it
// must be unforgeable. Whatever the bytes, decodeToken must not panic, and it may accept a
// token only if it is exactly the one the server would issue for that cursor and list:
// no other encoding of it, no token of another list (account, inbox, filters), no edited
// cursor. scripts/test.sh runs it for a bounded time; crashers stay in
// testdata/fuzz/FuzzPageToken as regression cases.
func FuzzPageToken(f *testing.F) {
	s, err := Open(context.Background(), filepath.Join(f.TempDir(), "inboxd.db"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	mine, other := db.ListScope("messages", "1", ""), db.ListScope("messages", "2", "")
	f.Add(s.encodeToken(mine, 1767225600000, 42), "1")
	f.Add(s.encodeToken(other, 1767225600000, 42), "1")
	f.Add(s.encodeToken(mine, -1, 0), "2")
	f.Add("eyJzIjoiIiwidCI6MCwiaSI6MH0.AAAAAAAAAAAAAAAAAAAAAA", "1")
	f.Add("20", "1")
	f.Add(".", "1")
	f.Fuzz(func(t *testing.T, token, inbox string) {
		scope := db.ListScope("messages", inbox, "")
		c, err := s.decodeToken(token, scope)
		if err != nil {
			if !db.IsCode(err, db.ECodeInvalidArgument) {
				t.Fatalf("%q: %v is not invalid_argument", token, err)
			}
			return
		}
		if token == "" {
			if c != nil {
				t.Fatalf("the empty token decoded to %+v", c)
			}
			return
		}
		if again := s.encodeToken(scope, c.TS, c.ID); again != token {
			t.Fatalf("accepted %q for inbox %q, but the server issues %q for that cursor", token, inbox, again)
		}
	})
}
