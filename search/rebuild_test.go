package search

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	qt "github.com/frankban/quicktest"
)

// scanSource is a Source of a fixed set of documents, with what Rebuild reads of one.
type scanSource struct {
	Source // the rest: not called by Rebuild
	docs   []Doc
}

func (s scanSource) StoreID(context.Context) (string, error)   { return "store", nil }
func (s scanSource) LastSeq(context.Context) (int64, error)    { return 0, nil }
func (s scanSource) Count(context.Context) (int64, error)      { return int64(len(s.docs)), nil }
func (s scanSource) Trim(context.Context, string, int64) error { return nil }
func (s scanSource) Scan(_ context.Context, after int64, limit int) ([]Doc, error) {
	var out []Doc
	for _, d := range s.docs {
		if d.ID > after && len(out) < limit {
			out = append(out, d)
		}
	}
	return out, nil
}

// A rebuild indexes every message of the store, reports its progress up to the total,
// and leaves an index that finds them.
func TestRebuildIndexesEveryMessage(t *testing.T) {
	c := qt.New(t)
	src := scanSource{}
	for i := int64(1); i <= 2*RebuildBatch+7; i++ {
		src.docs = append(src.docs, Doc{ID: i, Inbox: 1 + i%2, TS: 1000 * i, Subject: fmt.Sprintf("note %d", i), Body: "rutabaga soup"})
	}
	path := filepath.Join(t.TempDir(), "x.index")
	var last int64
	n, err := Rebuild(context.Background(), path, src, func(done, total int64) {
		c.Check(total, qt.Equals, int64(len(src.docs)))
		last = done
	})
	c.Assert(err, qt.IsNil)
	c.Assert(n, qt.Equals, int64(len(src.docs)))
	c.Assert(last, qt.Equals, n)
	ix, meta, err := Open(path)
	c.Assert(err, qt.IsNil)
	defer ix.Close()
	c.Assert(meta.Version, qt.Equals, Version)
	c.Assert(meta.Store, qt.Equals, "store")
	hits, more, err := ix.Search(context.Background(), Request{Inbox: 2, Query: Parse("rutabaga"), Limit: 5000})
	c.Assert(err, qt.IsNil)
	c.Assert(more, qt.IsFalse)
	c.Assert(len(hits), qt.Equals, RebuildBatch+4)           // the odd ids
	c.Assert(hits[0].ID, qt.Equals, int64(2*RebuildBatch+7)) // newest first
}
