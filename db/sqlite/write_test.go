package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/db"

	qt "github.com/frankban/quicktest"
)

// tempStore opens a store on a new file in the test's temporary directory, closed when
// the test ends.
func tempStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), Options{})
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { s.Close() })
	return s
}

// groupOf runs fns as concurrent writes that share one transaction, in the order given: a
// first write holds the committer until all of them are queued behind it.
func groupOf(t *testing.T, s *Store, fns []func(tx *sql.Tx) error) []error {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	go s.write(context.Background(), func(context.Context, *sql.Tx) error {
		close(held)
		<-hold
		return nil
	})
	<-held
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.write(context.Background(), func(_ context.Context, tx *sql.Tx) error { return fn(tx) })
		}()
		waitQueued(t, s, i+1) // one at a time, so they queue (and run) in the order given
	}
	close(hold)
	wg.Wait()
	return errs
}

// waitQueued waits until n writes are queued.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.writes.mu.Lock()
		got := len(s.writes.pending)
		s.writes.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d writes queued", got, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func setting(name string) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.Exec("INSERT INTO settings(name, value) VALUES (?, x'00')", name)
		return err
	}
}

func settingsNamed(t *testing.T, s *Store, names ...string) []string {
	t.Helper()
	var found []string
	for _, n := range names {
		var v []byte
		err := s.r.QueryRow("SELECT value FROM settings WHERE name = ?", n).Scan(&v)
		if err == nil {
			found = append(found, n)
		} else if !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
	}
	return found
}

func TestGroupedWritesFailAlone(t *testing.T) {
	c := qt.New(t)
	s := tempStore(t)

	refused := errors.New("refused")
	errs := groupOf(t, s, []func(tx *sql.Tx) error{
		setting("a"),
		func(tx *sql.Tx) error { // writes, then fails: its row must not stay
			if err := setting("b")(tx); err != nil {
				return err
			}
			return refused
		},
		setting("c"),
		func(tx *sql.Tx) error { panic("boom") },
		setting("a"), // a constraint error: the first "a" is already in this transaction
		setting("d"),
	})
	c.Check(errs[0], qt.IsNil)
	c.Check(errs[1], qt.Equals, refused)
	c.Check(errs[2], qt.IsNil)
	c.Check(errs[3], qt.ErrorMatches, "db: write panicked: boom")
	c.Check(errs[4], qt.IsNotNil)
	c.Check(errs[5], qt.IsNil)
	c.Assert(settingsNamed(t, s, "a", "b", "c", "d"), qt.DeepEquals, []string{"a", "c", "d"})
}

func TestGroupedWritesShareCommits(t *testing.T) {
	c := qt.New(t)
	s := tempStore(t)

	// More writes than one transaction takes: all of them land, in groups.
	var fns []func(tx *sql.Tx) error
	var names []string
	for i := range maxGroupWrites + 10 {
		names = append(names, fmt.Sprintf("n%d", i))
		fns = append(fns, setting(names[i]))
	}
	for _, err := range groupOf(t, s, fns) {
		c.Assert(err, qt.IsNil)
	}
	c.Assert(settingsNamed(t, s, names...), qt.HasLen, len(names))
}

// A full disk in the middle of a shared transaction: every write either reports success
// and is stored, or reports the transient storage error and left nothing behind.
func TestGroupedWritesOnAFullDisk(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := tempStore(t)
	c.Assert(s.SetFault(ctx, FaultFull), qt.IsNil)
	blob := make([]byte, 64<<10)
	var fns []func(tx *sql.Tx) error
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("big%d", i)
		names = append(names, name)
		fns = append(fns, func(tx *sql.Tx) error {
			_, err := tx.Exec("INSERT INTO settings(name, value) VALUES (?, ?)", name, blob)
			return err
		})
	}
	errs := groupOf(t, s, fns)
	c.Assert(s.SetFault(ctx, NoFault), qt.IsNil)
	stored := map[string]bool{}
	for _, n := range settingsNamed(t, s, names...) {
		stored[n] = true
	}
	failed := 0
	for i, err := range errs {
		if err == nil {
			c.Check(stored[names[i]], qt.IsTrue, qt.Commentf("%s acknowledged but not stored", names[i]))
			continue
		}
		failed++
		c.Check(stored[names[i]], qt.IsFalse, qt.Commentf("%s failed but stored", names[i]))
		c.Check(db.IsCode(err, db.ECodeUnavailable), qt.IsTrue, qt.Commentf("%v", err))
	}
	c.Assert(failed > 0, qt.IsTrue, qt.Commentf("the full disk refused nothing"))
}

// TestWriterFileSettings: a new file gets pageSize pages, and the writer keeps its
// temporary files (the savepoint sub-journal every grouped write fills) in memory, while
// the readers keep SQLite's default (a large sort may spill to disk).
func TestWriterFileSettings(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := tempStore(t)
	pragma := func(pool *sql.DB, name string) int {
		var v int
		c.Assert(pool.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v), qt.IsNil)
		return v
	}
	c.Assert(pragma(s.w, "page_size"), qt.Equals, pageSize)
	c.Assert(pragma(s.w, "temp_store"), qt.Equals, 2)    // MEMORY
	c.Assert(pragma(s.r.DB, "temp_store"), qt.Equals, 0) // DEFAULT
}

// txOf writes the setting name and returns the transaction it was written in.
func txOf(s *Store, name string) (*sql.Tx, error) {
	var got *sql.Tx
	err := s.write(context.Background(), func(_ context.Context, tx *sql.Tx) error {
		got = tx
		return setting(name)(tx)
	})
	return got, err
}

// A write on an idle store commits at once, however long the store may wait for a
// stream's next write.
func TestLoneWriteCommitsAtOnce(t *testing.T) {
	s := tempStore(t)
	s.writes.gatherWait = time.Minute
	for _, name := range []string{"first", "after a pause"} {
		start := time.Now()
		_, err := txOf(s, name)
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, time.Since(start) < 30*time.Second, qt.IsTrue, qt.Commentf("%s waited for company", name))
		time.Sleep(50 * time.Millisecond)
	}
}

// Writes that arrive one after another while the store is busy share commits, even
// when each arrives after the one before has started to commit: the store waits a moment
// for a stream's next write.
func TestStreamOfWritesShareCommits(t *testing.T) {
	c := qt.New(t)
	s := tempStore(t)
	s.writes.gatherWait = 5 * time.Millisecond
	// A commit in progress when the stream starts, as under load.
	hold, held := make(chan struct{}), make(chan struct{})
	go s.write(context.Background(), func(context.Context, *sql.Tx) error {
		close(held)
		<-hold
		return nil
	})
	<-held
	const n = 40
	txs := make([]*sql.Tx, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := txOf(s, fmt.Sprintf("s%d", i))
			c.Check(err, qt.IsNil)
			txs[i] = tx
		}()
		time.Sleep(300 * time.Microsecond)
		if i == 2 {
			close(hold)
		}
	}
	wg.Wait()
	distinct := map[*sql.Tx]bool{}
	for _, tx := range txs {
		distinct[tx] = true
	}
	c.Assert(len(distinct) <= n*3/4, qt.IsTrue, qt.Commentf("%d writes in %d commits", n, len(distinct)))
}

// Writers that each wait for their write before the next are not kept waiting for
// company: once every writer the store has lately seen is queued, none can come before
// the next commit, and the committer starts it at once, however long it would wait for a
// stream's next write (here a minute: without the rule the first round would wait half
// of it for a fifth writer).
func TestQueuedWritersDoNotWaitForCompany(t *testing.T) {
	c := qt.New(t)
	s := tempStore(t)
	s.writes.gatherWait = time.Minute
	s.writes.last = time.Time{} // as if Open had written nothing: the stream starts here
	const writers, rounds = 4, 3
	hold, held := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	// writer writes rounds times, each write once the one before returned; first, when
	// set, is written before them.
	writer := func(name string, first func(context.Context, *sql.Tx) error) {
		defer wg.Done()
		if first != nil {
			c.Check(s.write(context.Background(), first), qt.IsNil)
		}
		for r := range rounds {
			c.Check(s.write(context.Background(), func(_ context.Context, tx *sql.Tx) error {
				return setting(fmt.Sprintf("%s-%d", name, r))(tx)
			}), qt.IsNil)
		}
	}
	start := time.Now()
	wg.Add(writers)
	// The first writer's first write holds its commit while the others queue behind it.
	go writer("w0", func(_ context.Context, tx *sql.Tx) error {
		close(held)
		<-hold
		return setting("w0-first")(tx)
	})
	<-held
	for i := 1; i < writers; i++ {
		go writer(fmt.Sprintf("w%d", i), nil)
		waitQueued(t, s, i)
	}
	close(hold)
	wg.Wait()
	c.Assert(time.Since(start) < 15*time.Second, qt.IsTrue, qt.Commentf("%d writers, %d rounds: %v", writers, rounds, time.Since(start)))
}

// The writer connection checkpoints the WAL every walCheckpointPages pages, not at
// SQLite's 1,000 (driver.go).
func TestWriterCheckpointInterval(t *testing.T) {
	s := tempStore(t)
	var pages int
	qt.Assert(t, s.w.QueryRowContext(context.Background(), "PRAGMA wal_autocheckpoint").Scan(&pages), qt.IsNil)
	qt.Assert(t, pages, qt.Equals, walCheckpointPages)
	qt.Assert(t, pages > 1000, qt.IsTrue)
}
