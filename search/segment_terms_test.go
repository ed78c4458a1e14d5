package search

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// Every term's postings read through the file (segment_terms.go) are those zapx reads
// through its mapping, deletions taken out, in every field a query looks in: for segments
// built in memory and persisted, for merged ones, for one-document terms ("1-hit") and
// bitmaps longer than one read.
func TestSegmentTermsReadTheMappedPostings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x.index")
	ix, _, err := Open(dir)
	qt.Assert(t, err, qt.IsNil)
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("w%d", int(rng.ExpFloat64()*40)) }
	words := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(word() + " ")
		}
		return b.String()
	}
	cats := []string{"", "personal", "notification", "marketing"}
	apply := func(bt *Batch, seq int64) {
		done := make(chan error, 1)
		qt.Assert(t, ix.Apply(bt, seq, "s", func(err error) { done <- err }), qt.IsNil)
		qt.Assert(t, <-done, qt.IsNil)
	}
	// Batches of 600 make several segments, which the merger then merges; documents put
	// again later are deleted from the segments that held them.
	for b := range 12 {
		bt := ix.NewBatch()
		for i := range 600 {
			id := int64(b*600 + i + 1)
			if b >= 8 && i%3 == 0 {
				id = int64(rng.IntN(b*600) + 1)
			}
			bt.Put(&Doc{ID: id, Inbox: 1 + id%5, TS: id, Subject: words(4), From: "Ann <ann@x.test>",
				To: []string{word() + "@y.test"}, Body: words(30), Category: cats[id%4], Urgency: cats[id%3]})
		}
		apply(bt, int64(b+1))
	}
	// Wait for the merger to have merged some of the segments: merged segments inline
	// one-document postings lists in their dictionaries.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := ix.snapshot()
		qt.Assert(t, err, qt.IsNil)
		n := len(s.segs)
		s.close()
		if n < 12 {
			break
		}
		qt.Assert(t, time.Now().Before(deadline), qt.IsTrue, qt.Commentf("%d segments, none merged", n))
	}
	qt.Assert(t, ix.Close(), qt.IsNil)
	ix, _, err = Open(dir)
	qt.Assert(t, err, qt.IsNil)
	defer ix.Close()

	s, err := ix.snapshot()
	qt.Assert(t, err, qt.IsNil)
	defer s.close()
	qt.Assert(t, len(s.segs) > 1, qt.IsTrue)
	checked, deleted, large, oneHit := 0, 0, 0, 0
	for _, v := range s.segs {
		qt.Assert(t, v.terms, qt.IsNotNil)
		if v.deleted != nil && !v.deleted.IsEmpty() {
			deleted++
		}
		for _, field := range []string{"_id", fSubject, fFrom, fTo, fBody, fInbox, fCat, fUrgency, "nosuchfield"} {
			terms := []string{"absent"}
			if d, err := v.seg.Dictionary(field); err == nil && d != nil {
				it := d.AutomatonIterator(nil, nil, nil)
				for e, err := it.Next(); err == nil && e != nil; e, err = it.Next() {
					terms = append(terms, e.Term)
				}
			}
			for _, term := range terms {
				got, err := v.postings(field, term)
				qt.Assert(t, err, qt.IsNil)
				mapped := &segView{ix: ix, seg: v.seg, deleted: v.deleted, dicts: v.dicts}
				want, err := mapped.postings(field, term)
				qt.Assert(t, err, qt.IsNil)
				qt.Assert(t, got.Equals(want), qt.IsTrue, qt.Commentf("field %s term %q", field, term))
				checked++
				if want.GetCardinality() == 1 {
					oneHit++
				}
				if want.GetSizeInBytes() > postingsRead {
					large++
				}
			}
		}
	}
	qt.Assert(t, checked > 1000, qt.IsTrue)
	qt.Assert(t, deleted > 0, qt.IsTrue)
	qt.Assert(t, large > 0, qt.IsTrue)
	qt.Assert(t, oneHit > 0, qt.IsTrue)
}
