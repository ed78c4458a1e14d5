package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/inboxd/inboxd/db/sqlite"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// TestBackupWhileWriting takes a backup while messages keep arriving and checks that the
// copy opens, passes SQLite's integrity check and holds a consistent prefix of the writes.
func TestBackupWhileWriting(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	deliver := func(i int) error {
		_, err := db.Deliver(ctx, s, []db.NewMessage{{InboxID: in.ID, MessageID: fmt.Sprintf("<m%d@x>", i), Direction: db.Received,
			From: "a@x.test", Subject: "s", Text: "t", Timestamp: s.Now(), Labels: []string{db.LabelReceived}}})
		return err
	}
	for i := 0; i < 50; i++ {
		c.Assert(deliver(i), qt.IsNil)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 50; i < 150; i++ {
			if err := deliver(i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	out := filepath.Join(t.TempDir(), "backup.db")
	c.Assert(s.Backup(ctx, out), qt.IsNil)
	wg.Wait()
	c.Assert(s.Backup(ctx, out), qt.ErrorMatches, ".*already exists")

	b, err := sqlite.Open(ctx, out, sqlite.Options{})
	c.Assert(err, qt.IsNil)
	defer b.Close()
	ok, err := b.IntegrityCheck(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(ok, qt.Equals, "ok")
	bin, err := b.InboxByAddress(ctx, "a", "me@x.test")
	c.Assert(err, qt.IsNil)
	msgs, _, err := b.ListMessages(ctx, bin.ID, db.MessageFilter{}, 100, "")
	c.Assert(err, qt.IsNil)
	c.Assert(len(msgs) >= 50, qt.IsTrue, qt.Commentf("backup has %d messages", len(msgs)))
	c.Assert(sqlite.Version(), qt.Matches, `3\.\d+\.\d+`)
}

// A backup to a directory that is missing, or that is a file, says so rather than report
// a passing storage fault; nothing is left behind.
func TestBackupToABadPathSaysWhy(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	dir := t.TempDir()
	err := s.Backup(ctx, filepath.Join(dir, "missing", "x.db"))
	c.Assert(err, qt.ErrorMatches, `db: backup: cannot write .*missing/x.db: .*no such file or directory`)
	c.Assert(db.IsCode(err, db.ECodeUnavailable), qt.IsFalse)
	plain := filepath.Join(dir, "plain")
	c.Assert(os.WriteFile(plain, nil, 0o644), qt.IsNil)
	c.Assert(s.Backup(ctx, filepath.Join(plain, "x.db")), qt.ErrorMatches, `db: backup: .*x.db: not a directory`)
	entries, err := os.ReadDir(dir)
	c.Assert(err, qt.IsNil)
	c.Assert(entries, qt.HasLen, 1) // plain
}
