package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// An operator revokes a key and disables an account from the command line while the
// server runs on the same file: the server stops honouring them within a second, as the
// other processes of a shared database do (extensions section 6).
func TestOperatorRevokesKeysAndDisablesAccounts(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", Stdout: &bytes.Buffer{}}
	c.Assert(m.Run(ctx), qt.IsNil)
	defer m.Close()
	cli := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, args, &stdout, &stderr)
		return stdout.String() + stderr.String(), err
	}
	out, err := cli("keys", "create", "--db", dbPath, "--account", "default", "--scopes", "inboxes:read")
	c.Assert(err, qt.IsNil, qt.Commentf("%s", out))
	key := keyPattern.FindString(out)
	id := strings.Fields(out[strings.Index(out, "key id "):])[2]
	c.Assert(id, qt.Matches, `key_[0-9a-f]{16}`)
	inboxes := "http://" + m.Addr() + "/v1/inboxes"
	status, _ := get(t, inboxes, key)
	c.Assert(status, qt.Equals, 200)

	out, err = cli("keys", "list", "--db", dbPath, "--account", "default")
	c.Assert(err, qt.IsNil)
	c.Assert(out, qt.Contains, id)
	c.Assert(out, qt.Not(qt.Contains), key) // never the secret
	c.Assert(out, qt.Matches, `(?s).*`+id+`.*inboxes:read.*active\n.*`)

	eventually := func(want int) {
		c.Helper()
		deadline := time.Now().Add(1500 * time.Millisecond) // 1 s, and the time a request takes under -race
		for {
			status, _ := get(t, inboxes, key)
			if status == want {
				return
			}
			if time.Now().After(deadline) {
				c.Fatalf("still %d, want %d", status, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	_, err = cli("accounts", "disable", "--db", dbPath, "default")
	c.Assert(err, qt.IsNil)
	eventually(403)
	_, err = cli("accounts", "enable", "--db", dbPath, "default")
	c.Assert(err, qt.IsNil)
	eventually(200)

	out, err = cli("keys", "revoke", "--db", dbPath, id)
	c.Assert(err, qt.IsNil, qt.Commentf("%s", out))
	c.Assert(out, qt.Matches, "revoked "+id+" .*\n")
	eventually(401)
	out, _ = cli("keys", "list", "--db", dbPath)
	c.Assert(out, qt.Matches, `(?s).*`+id+`.*revoked\n.*`)

	_, err = cli("keys", "revoke", "--db", dbPath, "key_0123456789abcdef")
	c.Assert(err, qt.ErrorMatches, "not_found: key key_0123456789abcdef not found")
	_, err = cli("accounts", "enable", "--db", dbPath, "nobody")
	c.Assert(err, qt.ErrorMatches, "not_found: account nobody not found")
	_, err = cli("keys", "rotate")
	c.Assert(err, qt.ErrorMatches, "(?s)keys: give a subcommand: create, list or revoke.*")
}
