package search

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/document"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
	qt "github.com/frankban/quicktest"
)

// buildOurs and buildZapx build the segment of docs with our builder and with zapx.
func buildOurs(t testing.TB, docs []index.Document) segment.Segment {
	s, _, err := buildSegment(docs, nil)
	qt.Assert(t, err, qt.IsNil)
	return s
}

func buildZapx(t testing.TB, docs []index.Document) segment.Segment {
	s, _, err := (&zap.ZapPlugin{}).New(docs)
	qt.Assert(t, err, qt.IsNil)
	return s
}

// checkSameMerge merges segs without drops with zapx and with mergeSegments, requires the
// same file, document numbers and size, and returns the merged segment, opened from our
// file.
func checkSameMerge(t testing.TB, segs []segment.Segment, drops []*roaring.Bitmap) segment.Segment {
	t.Helper()
	dir := t.TempDir()
	wantPath, gotPath := filepath.Join(dir, "zapx.zap"), filepath.Join(dir, "ours.zap")
	wantNums, wantSize, err := (&zap.ZapPlugin{}).Merge(segs, drops, wantPath, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	before := segmentsMerged.Load()
	gotNums, gotSize, err := mergeSegments(segs, drops, gotPath, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, segmentsMerged.Load(), qt.Equals, before+1)
	qt.Assert(t, gotNums, qt.DeepEquals, wantNums)
	qt.Assert(t, gotSize, qt.Equals, wantSize)
	want, err := os.ReadFile(wantPath)
	qt.Assert(t, err, qt.IsNil)
	got, err := os.ReadFile(gotPath)
	qt.Assert(t, err, qt.IsNil)
	want = sortSections(t, want)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("merged segments differ from byte %d (sizes %d and %d)", i, len(got), len(want))
	}
	s, err := (&zap.ZapPlugin{}).Open(gotPath)
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fewLongDocs is randomDocs with one text past the caps in 300 (they make tests slow).
func fewLongDocs(seed uint64, n int) []*Doc {
	rng := rand.New(rand.NewPCG(seed, 12))
	ds := make([]*Doc, n)
	for i := range ds {
		ds[i] = randomDoc(rng, int64(i+1), 300)
	}
	return ds
}

// randomDrops drops each document of each segment with probability p (every one of the
// segment numbered all, none of those numbered none).
func randomDrops(rng *rand.Rand, segs []segment.Segment, p float64, all, none int) []*roaring.Bitmap {
	drops := make([]*roaring.Bitmap, len(segs))
	for i, s := range segs {
		switch {
		case i == none:
			if rng.IntN(2) == 0 {
				drops[i] = roaring.New() // empty and nil both mean none
			}
			continue
		case i == all:
			drops[i] = roaring.New()
			drops[i].AddRange(0, s.Count())
			continue
		}
		drops[i] = roaring.New()
		for d := range s.Count() {
			if rng.Float64() < p {
				drops[i].Add(uint32(d))
			}
		}
	}
	return drops
}

// Our merges are zapx's, byte for byte: of 2, 3 and 10 segments, built by us and by zapx,
// with and without deleted documents, and of segments merged before.
func TestMergeSameAsZapx(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	seed := uint64(100)
	segsOf := func(n int, build func(testing.TB, []index.Document) segment.Segment) []segment.Segment {
		var segs []segment.Segment
		for range n {
			seed++
			segs = append(segs, build(t, analyzedDocs(fewLongDocs(seed, 1+rng.IntN(300)))))
		}
		return segs
	}
	for _, n := range []int{2, 3, 10} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			segs := segsOf(n, buildOurs)
			checkSameMerge(t, segs, make([]*roaring.Bitmap, n))
			checkSameMerge(t, segs, randomDrops(rng, segs, 0.2, 1, 0))
			checkSameMerge(t, segs, randomDrops(rng, segs, 0.9, -1, n-1))
		})
	}
	t.Run("zapx and ours", func(t *testing.T) {
		segs := append(segsOf(2, buildZapx), segsOf(2, buildOurs)...)
		checkSameMerge(t, segs, randomDrops(rng, segs, 0.1, -1, 2))
	})
	t.Run("merged", func(t *testing.T) {
		var merged []segment.Segment
		for range 3 {
			segs := segsOf(3, buildOurs)
			merged = append(merged, checkSameMerge(t, segs, randomDrops(rng, segs, 0.1, -1, 0)))
		}
		merged = append(merged, segsOf(1, buildOurs)...)
		m := checkSameMerge(t, merged, randomDrops(rng, merged, 0.3, -1, 1))
		again := []segment.Segment{m, merged[0]}
		checkSameMerge(t, again, randomDrops(rng, again, 0.5, -1, -1))
	})
	t.Run("other fields", func(t *testing.T) {
		// Segments without the optional fields (attachments, categories) and with a
		// field of its own: their field ids differ from the merged segment's.
		plain := randomDocs(200, 50)
		for _, d := range plain {
			d.Attachments, d.Category, d.NeedsReply, d.Urgency, d.To = nil, "", "", "", nil
		}
		extra := analyzedDocs(randomDocs(201, 30))
		for _, d := range extra {
			f := document.NewTextFieldCustom("aaa", nil, []byte("extra words here"), index.IndexField|index.IncludeTermVectors|index.StoreField, nil)
			f.Analyze()
			d.(*document.Document).AddField(f)
		}
		segs := []segment.Segment{buildOurs(t, analyzedDocs(plain)), buildOurs(t, extra)}
		segs = append(segs, segsOf(1, buildZapx)...)
		checkSameMerge(t, segs, make([]*roaring.Bitmap, len(segs)))
		checkSameMerge(t, segs, randomDrops(rng, segs, 0.2, -1, 0))
	})
	t.Run("single postings", func(t *testing.T) {
		// Terms of one posting (1-hits when of frequency 1 without locations), in
		// segments where the other postings of the term are dropped.
		ds := []*Doc{{ID: 1, Inbox: 1, Subject: "a"}, {ID: 2, Inbox: 2, Subject: "a b"}, {ID: 3, Inbox: 3, Body: "c"}}
		segs := []segment.Segment{buildOurs(t, analyzedDocs(ds)), buildOurs(t, analyzedDocs(ds[1:])), buildOurs(t, analyzedDocs(ds[:1]))}
		for i := range 8 {
			drops := make([]*roaring.Bitmap, len(segs))
			for j := range segs {
				if i&(1<<j) != 0 {
					drops[j] = roaring.BitmapOf(0)
				}
			}
			m := checkSameMerge(t, segs, drops)
			checkSameMerge(t, []segment.Segment{m, segs[1]}, []*roaring.Bitmap{roaring.BitmapOf(0), nil})
		}
	})
}

// Past 65,536 documents a term in all of them fills a bitmap container, which roaring
// makes a run; past 1,024 postings a term's postings are in several chunks.
func TestMergeSameAsZapxDense(t *testing.T) {
	if testing.Short() {
		t.Skip("70,000 documents")
	}
	var segs []segment.Segment
	for s := range 2 {
		ds := make([]*Doc, 35000)
		for i := range ds {
			ds[i] = &Doc{ID: int64(s*35000 + i), Inbox: 1, TS: 1.7e12, Subject: fmt.Sprintf("w%d common", i%7), Body: "x"}
		}
		segs = append(segs, buildOurs(t, analyzedDocs(ds)))
	}
	m := checkSameMerge(t, segs, make([]*roaring.Bitmap, len(segs)))
	checkSameMerge(t, []segment.Segment{m, segs[0]}, []*roaring.Bitmap{roaring.BitmapOf(5, 70000-1), nil})
}

// A merge cancelled through closeCh returns segment.ErrClosed and leaves no file.
func TestMergeCancelled(t *testing.T) {
	segs := []segment.Segment{buildOurs(t, analyzedDocs(randomDocs(1, 50))), buildOurs(t, analyzedDocs(randomDocs(2, 50)))}
	closed := make(chan struct{})
	close(closed)
	path := filepath.Join(t.TempDir(), "merged.zap")
	_, _, err := mergeSegments(segs, make([]*roaring.Bitmap, 2), path, closed, nil)
	qt.Assert(t, err, qt.Equals, segment.ErrClosed)
	_, err = os.Stat(path)
	qt.Assert(t, os.IsNotExist(err), qt.IsTrue)
	// Through the plugin, on a niced thread (segment_merge_nice.go).
	before := nicedRuns.Load()
	_, _, err = (&segPlugin{}).Merge(segs, make([]*roaring.Bitmap, 2), path, closed, nil)
	qt.Assert(t, err, qt.Equals, segment.ErrClosed)
	qt.Assert(t, nicedRuns.Load(), qt.Equals, before+1)
}

// Segments the merger does not handle are refused, and the plugin merges them with zapx.
func TestMergeRefusesOthers(t *testing.T) {
	docs := func() []index.Document {
		docs := analyzedDocs(randomDocs(9, 3))
		f := document.NewTextFieldCustom("dv", nil, []byte("value"), index.IndexField|index.DocValues, nil)
		f.Analyze()
		docs[1].(*document.Document).AddField(f)
		return docs
	}
	other := buildOurs(t, analyzedDocs(randomDocs(10, 5)))
	segs := []segment.Segment{buildZapx(t, docs()), other}
	dir := t.TempDir()
	_, _, err := mergeSegments(segs, make([]*roaring.Bitmap, 2), filepath.Join(dir, "x.zap"), nil, nil)
	qt.Assert(t, err, qt.Equals, errSegmentUnsupported)
	_, err = os.Stat(filepath.Join(dir, "x.zap"))
	qt.Assert(t, os.IsNotExist(err), qt.IsTrue)
	wantNums, _, err := (&zap.ZapPlugin{}).Merge(segs, make([]*roaring.Bitmap, 2), filepath.Join(dir, "zapx.zap"), nil, nil)
	qt.Assert(t, err, qt.IsNil)
	before, niced := segmentsMerged.Load(), nicedRuns.Load()
	gotNums, _, err := (&segPlugin{}).Merge(segs, make([]*roaring.Bitmap, 2), filepath.Join(dir, "ours.zap"), nil, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, segmentsMerged.Load(), qt.Equals, before)
	qt.Assert(t, nicedRuns.Load(), qt.Equals, niced+2) // ours refusing, then zapx's, both niced
	qt.Assert(t, gotNums, qt.DeepEquals, wantNums)
	want, err := os.ReadFile(filepath.Join(dir, "zapx.zap"))
	qt.Assert(t, err, qt.IsNil)
	got, err := os.ReadFile(filepath.Join(dir, "ours.zap"))
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, bytes.Equal(sortSections(t, got), sortSections(t, want)), qt.IsTrue)

	// Every document dropped: zapx writes no fields' sections.
	all := roaring.New()
	all.AddRange(0, other.Count())
	_, _, err = mergeSegments([]segment.Segment{other}, []*roaring.Bitmap{all}, filepath.Join(dir, "y.zap"), nil, nil)
	qt.Assert(t, err, qt.Equals, errSegmentUnsupported)
}

// The mergers on the same segments: five of a rebuild's batches of 2,000 messages, with
// 1% of the messages deleted.
func BenchmarkMergeZapx(b *testing.B) {
	benchmarkMerge(b, (&zap.ZapPlugin{}).Merge)
}

func BenchmarkMergeOurs(b *testing.B) {
	benchmarkMerge(b, func(segs []segment.Segment, drops []*roaring.Bitmap, path string, closeCh chan struct{},
		_ segment.StatsReporter) ([][]uint64, uint64, error) {
		return mergeSegments(segs, drops, path, closeCh, nil)
	})
}

func benchmarkMerge(b *testing.B, merge func([]segment.Segment, []*roaring.Bitmap, string, chan struct{},
	segment.StatsReporter) ([][]uint64, uint64, error)) {
	docs := analyzedDocs(benchDocs(5 * RebuildBatch))
	var segs []segment.Segment
	for i := 0; i < len(docs); i += RebuildBatch {
		segs = append(segs, buildOurs(b, docs[i:i+RebuildBatch]))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	drops := randomDrops(rng, segs, 0.01, -1, -1)
	path := filepath.Join(b.TempDir(), "merged.zap")
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		if _, _, err := merge(segs, drops, path, nil, nil); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*len(docs)), "cpu-µs/msg")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(docs)), "µs/msg")
}
