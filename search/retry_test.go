package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// errFault is what a broken memSource method answers, as a store on a full disk would.
var errFault = errors.New("disk I/O error: no space left on device")

// memSource is a store held in memory: its searchable messages and its index queue.
// breaking a method makes it fail until it is mended.
type memSource struct {
	mu     sync.Mutex
	docs   map[int64]Doc
	queue  []Change // not trimmed yet, in order
	seq    int64    // newest queued
	broken map[string]bool
}

func newMemSource() *memSource { return &memSource{docs: map[int64]Doc{}, broken: map[string]bool{}} }

// add stores messages and queues their changes.
func (s *memSource) add(docs ...Doc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range docs {
		s.docs[d.ID] = d
		s.seq++
		s.queue = append(s.queue, Change{Seq: s.seq, Message: d.ID, Inbox: d.Inbox, TS: d.TS})
	}
}

// set breaks (or mends) the named methods.
func (s *memSource) set(broken bool, methods ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range methods {
		s.broken[m] = broken
	}
}

// enter locks s for one call of method and returns errFault if it is broken.
func (s *memSource) enter(method string) error {
	s.mu.Lock()
	if s.broken[method] {
		return errFault
	}
	return nil
}

func (s *memSource) StoreID(context.Context) (string, error) {
	defer s.mu.Unlock()
	return "mem", s.enter("StoreID")
}

func (s *memSource) QueueBounds(context.Context) (int64, int64, error) {
	defer s.mu.Unlock()
	if err := s.enter("QueueBounds"); err != nil {
		return 0, 0, err
	}
	if len(s.queue) == 0 {
		return s.seq, s.seq + 1, nil
	}
	return s.seq, s.queue[0].Seq, nil
}

func (s *memSource) LastSeq(context.Context) (int64, error) {
	defer s.mu.Unlock()
	return s.seq, s.enter("LastSeq")
}

func (s *memSource) InboxChanges(_ context.Context, inbox, after int64, limit int) ([]Change, error) {
	defer s.mu.Unlock()
	if err := s.enter("InboxChanges"); err != nil {
		return nil, err
	}
	return s.changes(after, limit, func(c Change) bool { return c.Inbox == inbox }), nil
}

func (s *memSource) Changes(_ context.Context, after int64, limit int) ([]Change, error) {
	defer s.mu.Unlock()
	if err := s.enter("Changes"); err != nil {
		return nil, err
	}
	return s.changes(after, limit, func(Change) bool { return true }), nil
}

func (s *memSource) changes(after int64, limit int, keep func(Change) bool) []Change {
	var out []Change
	for _, c := range s.queue {
		if c.Seq > after && keep(c) && len(out) < limit {
			out = append(out, c)
		}
	}
	return out
}

func (s *memSource) Docs(_ context.Context, ids []int64) ([]Doc, error) {
	defer s.mu.Unlock()
	if err := s.enter("Docs"); err != nil {
		return nil, err
	}
	var out []Doc
	for _, id := range ids {
		if d, ok := s.docs[id]; ok {
			out = append(out, d)
		}
	}
	return out, nil
}

func (s *memSource) Scan(_ context.Context, after int64, limit int) ([]Doc, error) {
	defer s.mu.Unlock()
	if err := s.enter("Scan"); err != nil {
		return nil, err
	}
	var ids []int64
	for id := range s.docs {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []Doc
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, s.docs[id])
	}
	return out, nil
}

func (s *memSource) Count(context.Context) (int64, error) {
	defer s.mu.Unlock()
	return int64(len(s.docs)), s.enter("Count")
}

func (s *memSource) Trim(_ context.Context, _ string, through int64) error {
	defer s.mu.Unlock()
	if err := s.enter("Trim"); err != nil {
		return err
	}
	s.queue = slices.DeleteFunc(s.queue, func(c Change) bool { return c.Seq <= through })
	return nil
}

// logBuffer collects log lines from the indexer's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count returns how many lines contain s.
func (l *logBuffer) count(s string) int {
	return strings.Count(l.String(), s)
}

// fastRetries are Options that retry within milliseconds, for tests.
func fastRetries(log *logBuffer) Options {
	return Options{Poll: 10 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(log, nil))}
}

// mail returns n messages of inbox whose subject holds word, with ids from first.
func mail(inbox, first int64, n int, word string) []Doc {
	var out []Doc
	for i := range int64(n) {
		out = append(out, Doc{ID: first + i, Inbox: inbox, TS: 1000 * (first + i), Subject: fmt.Sprintf("%s %d", word, first+i)})
	}
	return out
}

// found returns how many messages a search of inbox for query finds (up to 1000).
func found(x *Indexer, inbox int64, query string) (int, error) {
	hits, _, err := x.Search(context.Background(), Request{Inbox: inbox, Query: Parse(query), Limit: 1000})
	return len(hits), err
}

// eventually waits up to ten seconds for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// A rebuild that fails (the store cannot be read, as on a full disk) is tried again and
// again: searches answer ErrNotReady and the index says it is degraded meanwhile, and
// Close then is no error. Once the cause is gone the index is built and searches find
// the mail. The log says each change of state once, not once per attempt.
func TestIndexerHealsAfterAFailedRebuild(t *testing.T) {
	c := qt.New(t)
	src := newMemSource()
	src.add(mail(1, 1, 3, "rutabaga")...)
	src.set(true, "Scan")
	path := filepath.Join(t.TempDir(), "x.index")
	x := NewIndexer(path, src, fastRetries(&logBuffer{}))
	c.Assert(x.Start(context.Background()), qt.IsNil)
	eventually(t, "degraded", x.Degraded)
	c.Assert(x.Close(), qt.IsNil)

	var log logBuffer
	x = NewIndexer(path, src, fastRetries(&log))
	c.Assert(x.Start(context.Background()), qt.IsNil)
	defer x.Close()

	eventually(t, "several attempts failed", func() bool { return x.Failures() >= 5 })
	c.Assert(x.Degraded(), qt.IsTrue)
	_, err := found(x, 1, "rutabaga")
	c.Assert(err, qt.ErrorIs, ErrNotReady)

	src.set(false, "Scan")
	eventually(t, "the index healed", func() bool { n, err := found(x, 1, "rutabaga"); return err == nil && n == 3 })
	c.Assert(x.Degraded(), qt.IsFalse)
	src.add(mail(1, 4, 1, "rutabaga")...)
	eventually(t, "new mail indexed", func() bool { n, _ := found(x, 1, "rutabaga"); return n == 4 })

	c.Assert(log.count("search index degraded"), qt.Equals, 1, qt.Commentf("%s", log.String()))
	c.Assert(log.count("rebuilding the search index"), qt.Equals, 1)
	c.Assert(log.count("search index recovered"), qt.Equals, 1)
	c.Assert(x.Close(), qt.IsNil)
}

// A batch that cannot be applied (the store's queue cannot be read) is tried again until
// it can. Meanwhile a search the index cannot answer in full (its inbox has more changes
// pending than a search matches itself) answers ErrNotReady at once rather than what the
// index held before, and one it can answers as usual. Closing then is no error.
func TestIndexerRetriesAFailedUpdate(t *testing.T) {
	c := qt.New(t)
	src := newMemSource()
	src.add(mail(1, 1, 1, "parsnip")...)
	var log logBuffer
	x := NewIndexer(filepath.Join(t.TempDir(), "x.index"), src, fastRetries(&log))
	c.Assert(x.Start(context.Background()), qt.IsNil)
	defer x.Close()
	eventually(t, "indexed", func() bool { n, _ := found(x, 1, "parsnip"); return n == 1 })

	src.set(true, "Changes")
	src.add(mail(1, 2, maxTail+10, "parsnip")...)
	src.add(mail(2, 1000, 1, "turnip")...)
	eventually(t, "degraded", x.Degraded)
	_, err := found(x, 1, "parsnip")
	c.Assert(err, qt.ErrorIs, ErrNotReady)
	n, err := found(x, 2, "turnip")
	c.Assert(err, qt.IsNil)
	c.Assert(n, qt.Equals, 1)

	failures := x.Failures()
	eventually(t, "tried again", func() bool { return x.Failures() > failures })
	src.set(false, "Changes")
	eventually(t, "healed", func() bool { return !x.Degraded() })
	n, err = found(x, 1, "parsnip")
	c.Assert(err, qt.IsNil)
	c.Assert(n, qt.Equals, maxTail+11)
	c.Assert(log.count("search index degraded"), qt.Equals, 1, qt.Commentf("%s", log.String()))
	c.Assert(log.count("search index recovered"), qt.Equals, 1)
	c.Assert(x.Close(), qt.IsNil)
}

// An index directory that cannot be created (here a dangling symlink in its place: a
// full disk or a directory the server may not write behave alike, but a test run as root
// cannot make a directory unwritable) does not stop Start: the index is degraded and
// heals once the path is usable.
func TestIndexerStartsWithAnIndexItCannotOpen(t *testing.T) {
	c := qt.New(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.index")
	c.Assert(os.Symlink(filepath.Join(dir, "gone", "x.index"), path), qt.IsNil)
	src := newMemSource()
	src.add(mail(1, 1, 2, "kohlrabi")...)
	var log logBuffer
	x := NewIndexer(path, src, fastRetries(&log))
	c.Assert(x.Start(context.Background()), qt.IsNil)
	defer x.Close()
	eventually(t, "degraded", x.Degraded)
	_, err := found(x, 1, "kohlrabi")
	c.Assert(err, qt.ErrorIs, ErrNotReady)

	c.Assert(os.Remove(path), qt.IsNil)
	eventually(t, "healed", func() bool { n, err := found(x, 1, "kohlrabi"); return err == nil && n == 2 })
	c.Assert(x.Degraded(), qt.IsFalse)
	c.Assert(x.Close(), qt.IsNil)
}
