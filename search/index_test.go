package search

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	qt "github.com/frankban/quicktest"
)

// An index another holder has open is reported as in use, never as corrupt: corrupt
// indexes are deleted and rebuilt, and that must not happen to a running server's.
func TestOpenLockedIsNotCorrupt(t *testing.T) {
	t.Parallel() // it waits out the lock's timeouts (idle)
	path := filepath.Join(t.TempDir(), "x.index")
	ix, _, err := Open(path)
	qt.Assert(t, err, qt.IsNil)
	defer ix.Close()
	_, _, err = Open(path)
	qt.Assert(t, err, qt.IsNotNil)
	qt.Assert(t, errors.Is(err, ErrCorrupt), qt.IsFalse, qt.Commentf("%v", err))
	qt.Assert(t, err, qt.ErrorIs, ErrInUse)
	_, err = Rebuild(context.Background(), path, nil, nil)
	qt.Assert(t, err, qt.IsNotNil)
	// A server does not start over an index another one holds: it would wait for it
	// forever, degraded, beside a server that works.
	err = NewIndexer(path, newMemSource(), Options{}).Start(context.Background())
	qt.Assert(t, err, qt.ErrorIs, ErrInUse)
}

func TestSearchOrderAndCursor(t *testing.T) {
	ix, _, err := Open(filepath.Join(t.TempDir(), "x.index"))
	qt.Assert(t, err, qt.IsNil)
	defer ix.Close()
	bt := ix.NewBatch()
	for i := int64(1); i <= 9; i++ {
		subject := "plain"
		if i%3 == 0 {
			subject = "kiwi"
		}
		bt.Put(&Doc{ID: i, Inbox: 1, TS: 1000 * (i % 4), Subject: subject, Body: "kiwi"})
	}
	bt.Put(&Doc{ID: 10, Inbox: 2, TS: 5, Subject: "kiwi"}) // another inbox
	done := make(chan error, 1)
	qt.Assert(t, ix.Apply(bt, 1, "s", func(err error) { done <- err }), qt.IsNil)
	qt.Assert(t, <-done, qt.IsNil)
	q := Parse("kiwi")
	all, more, err := ix.Search(context.Background(), Request{Inbox: 1, Query: q, Limit: 100})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, more, qt.IsFalse)
	var ids []int64
	for _, h := range all {
		ids = append(ids, h.ID)
	}
	// Subject hits first (9, 6, 3 by time then id), then body hits by time, then id.
	qt.Assert(t, ids, qt.DeepEquals, []int64{3, 6, 9, 7, 2, 5, 1, 8, 4})
	var paged []int64
	var after *Hit
	for {
		page, more, err := ix.Search(context.Background(), Request{Inbox: 1, Query: q, Limit: 2, After: after})
		qt.Assert(t, err, qt.IsNil)
		for _, h := range page {
			paged = append(paged, h.ID)
		}
		if !more {
			break
		}
		after = &page[len(page)-1]
	}
	qt.Assert(t, paged, qt.DeepEquals, ids)
}
