package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
)

// Commands that work on an existing database refuse a path with none, instead of creating
// an empty one there and reporting on it.
func TestCommandsNeedAnExistingDatabase(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{
		{"backup", "--db", missing, filepath.Join(dir, "out.db")},
		{"keys", "create", "--db", missing, "--account", "default", "--scopes", "inboxes:read"},
		{"keys", "list", "--db", missing},
		{"keys", "revoke", "--db", missing, "key_0000000000000000"},
		{"accounts", "disable", "--db", missing, "default"},
		{"reindex", "--db", missing},
	} {
		err := run(context.Background(), args, &stdout, &stderr)
		c.Assert(err, qt.ErrorMatches, args[0]+".*typo.db: no such file or directory", qt.Commentf("%v", args))
	}
	entries, err := os.ReadDir(dir)
	c.Assert(err, qt.IsNil)
	c.Assert(entries, qt.HasLen, 0) // no database, no backup
}

// The DKIM record to publish is logged with the server's domain in its name.
func TestDKIMRecordLoggedForTheDomain(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dir := t.TempDir()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	c.Assert(err, qt.IsNil)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	c.Assert(err, qt.IsNil)
	keyPath := filepath.Join(dir, "dkim.pem")
	c.Assert(os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600), qt.IsNil)
	var logs bytes.Buffer
	m := &Main{DBPath: filepath.Join(dir, "inboxd.db"), HTTPAddr: "127.0.0.1:0", Domain: "Example.COM",
		DKIMKey: keyPath, DKIMSelector: "s2026", Stdout: &bytes.Buffer{}, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	defer m.Close()
	c.Assert(logs.String(), qt.Contains, `dns="s2026._domainkey.example.com. TXT v=DKIM1; k=ed25519; p=`)
}

// keys create --inbox replaces the inbox's mailbox key: the old one stops working.
func TestKeysCreateReplacesMailboxKey(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inboxd.db")
	store, err := sqlite.Open(ctx, path, sqlite.Options{})
	c.Assert(err, qt.IsNil)
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "a", Plan: db.PlanExempt}, nil), qt.IsNil)
	_, err = db.CreateInbox(ctx, store, db.NewInbox{AccountID: "a", Address: "ops@x.test", DefaultDomain: "x.test"})
	c.Assert(err, qt.IsNil)
	c.Assert(store.Close(), qt.IsNil)

	create := func() string {
		var stdout, stderr bytes.Buffer
		err := run(ctx, []string{"keys", "create", "--db", path, "--account", "a", "--inbox", "ops@x.test"}, &stdout, &stderr)
		c.Assert(err, qt.IsNil, qt.Commentf("%s", stderr.String()))
		return strings.TrimSpace(stdout.String())
	}
	first, second := create(), create()

	store, err = sqlite.Open(ctx, path, sqlite.Options{})
	c.Assert(err, qt.IsNil)
	defer store.Close()
	_, err = store.Authenticate(ctx, second)
	c.Assert(err, qt.IsNil)
	_, err = store.Authenticate(ctx, first)
	c.Assert(db.IsCode(err, db.ECodeUnauthorized), qt.IsTrue, qt.Commentf("%v", err))
}
