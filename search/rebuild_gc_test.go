package search

import (
	"context"
	"math"
	"path/filepath"
	"runtime/debug"
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

// A rebuild runs without the process's soft memory limit, and puts it back.
func TestRebuildLiftsTheMemoryLimit(t *testing.T) {
	c := qt.New(t)
	const limit = 160 << 20
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	src := scanSource{docs: []Doc{{ID: 1, Inbox: 1, TS: 1, Subject: "one", Body: "rutabaga"}, {ID: 2, Inbox: 1, TS: 2, Subject: "two", Body: "potato"}}}
	var during []int64
	n, err := Rebuild(context.Background(), filepath.Join(t.TempDir(), "x.index"), src, func(done, total int64) {
		during = append(during, debug.SetMemoryLimit(-1))
	})
	c.Assert(err, qt.IsNil)
	c.Assert(n, qt.Equals, int64(2))
	c.Assert(during, qt.Not(qt.HasLen), 0)
	for _, l := range during {
		c.Assert(l, qt.Equals, int64(math.MaxInt64))
	}
	c.Assert(debug.SetMemoryLimit(-1), qt.Equals, int64(limit))
}
