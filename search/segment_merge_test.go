package search

import (
	"bytes"
	"fmt"
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

// checkSameMerge merges segs without drops with zapx and with mergeSegments and requires
// the same file and the same new document numbers.
func checkSameMerge(t *testing.T, segs []segment.Segment, drops []*roaring.Bitmap) {
	t.Helper()
	if drops == nil {
		drops = make([]*roaring.Bitmap, len(segs)) // zapx takes one for each segment
	}
	dir := t.TempDir()
	wantPath, gotPath := filepath.Join(dir, "zapx.zap"), filepath.Join(dir, "ours.zap")
	wantNums, _, err := (&zap.ZapPlugin{}).Merge(segs, drops, wantPath, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	gotNums, size, err := mergeSegments(segs, drops, gotPath, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, gotNums, qt.DeepEquals, wantNums)
	want, err := os.ReadFile(wantPath)
	qt.Assert(t, err, qt.IsNil)
	got, err := os.ReadFile(gotPath)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, size, qt.Equals, uint64(len(got)))
	want = sortSections(t, want)
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("merged segments differ from byte %d (sizes %d and %d)", i, len(got), len(want))
	}
}

func ourSegment(t testing.TB, docs []index.Document) segment.Segment {
	s, _, err := buildSegment(docs, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	return s
}

func zapxSegment(t testing.TB, docs []index.Document) segment.Segment {
	s, _, err := (&zap.ZapPlugin{}).New(docs)
	qt.Assert(t, err, qt.IsNil)
	return s
}

// persisted writes s to a file and opens it, as scorch's file merges find their segments.
func persisted(t *testing.T, s segment.Segment) segment.Segment {
	path := filepath.Join(t.TempDir(), "s.zap")
	qt.Assert(t, s.(segment.UnpersistedSegment).Persist(path), qt.IsNil)
	f, err := (&zap.ZapPlugin{}).Open(path)
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { f.Close() })
	return f
}

// Our merge writes the file zapx's merge writes, across chunk and container boundaries,
// with deleted documents, segments of different fields, segments in memory and on disk,
// and zapx's own segments (its "1-hit" postings). The cases share nothing and are the
// package's longest under the race detector, so they run in parallel.
func TestMergeSameAsZapx(t *testing.T) {
	t.Parallel()
	t.Run("deletes", func(t *testing.T) {
		t.Parallel()
		segs := []segment.Segment{ourSegment(t, analyzedDocs(randomDocs(31, 300))), ourSegment(t, analyzedDocs(randomDocs(32, 1030)))}
		checkSameMerge(t, segs, []*roaring.Bitmap{roaring.BitmapOf(0, 5, 299), roaring.BitmapOf(3, 1024, 1025)})
		checkSameMerge(t, segs, nil)
		checkSameMerge(t, segs, []*roaring.Bitmap{nil, roaring.BitmapOf(7)})
	})
	t.Run("files", func(t *testing.T) {
		t.Parallel()
		segs := []segment.Segment{persisted(t, ourSegment(t, analyzedDocs(randomDocs(33, 500)))),
			ourSegment(t, analyzedDocs(randomDocs(34, 40))), persisted(t, ourSegment(t, analyzedDocs(randomDocs(35, 3000))))}
		checkSameMerge(t, segs, []*roaring.Bitmap{roaring.BitmapOf(1), nil, roaring.BitmapOf(2999)})
	})
	t.Run("other fields", func(t *testing.T) {
		t.Parallel()
		// No triage fields or attachments in the first, nothing but them in the second.
		a := randomDocs(36, 50)
		for _, d := range a {
			d.Category, d.NeedsReply, d.Urgency, d.Attachments = "", "", "", nil
		}
		b := []*Doc{{ID: 1000, TS: 1, Category: "billing", NeedsReply: "yes", Attachments: []string{"x.pdf"}}}
		checkSameMerge(t, []segment.Segment{ourSegment(t, analyzedDocs(a)), ourSegment(t, analyzedDocs(b))}, nil)
	})
	t.Run("zapx's segments", func(t *testing.T) {
		t.Parallel()
		// A field of its own (zapx builds the batch), with terms in one document each.
		docs := analyzedDocs(randomDocs(37, 20))
		for i, d := range docs {
			f := document.NewTextFieldCustom(fReply, nil, []byte(fmt.Sprint("only", i)), optKeyword, nil)
			f.Analyze()
			d.(*document.Document).AddField(f)
		}
		segs := []segment.Segment{zapxSegment(t, docs), ourSegment(t, analyzedDocs(randomDocs(38, 30)))}
		checkSameMerge(t, segs, []*roaring.Bitmap{roaring.BitmapOf(4), nil})
	})
	t.Run("full container", func(t *testing.T) {
		t.Parallel()
		// More than 65,536 documents: every message's keywords fill roaring containers.
		var segs []segment.Segment
		for s := range 3 {
			ds := make([]*Doc, 25000)
			for i := range ds {
				ds[i] = &Doc{ID: int64(s*25000 + i), Inbox: 1, TS: 1.7e12, Subject: fmt.Sprint("w", i%5)}
			}
			segs = append(segs, ourSegment(t, analyzedDocs(ds)))
		}
		checkSameMerge(t, segs, nil)
	})
}

// Segments the merger does not read are refused before anything is written, and the
// plugin merges them with zapx.
func TestMergeRefusesOthers(t *testing.T) {
	docs := analyzedDocs(randomDocs(39, 10))
	f := document.NewTextFieldCustom("other", nil, []byte("value"), index.IndexField, nil)
	f.Analyze()
	docs[3].(*document.Document).AddField(f)
	segs := []segment.Segment{zapxSegment(t, docs), ourSegment(t, analyzedDocs(randomDocs(40, 10)))}
	path := filepath.Join(t.TempDir(), "s.zap")
	drops := []*roaring.Bitmap{nil, nil}
	_, _, err := mergeSegments(segs, drops, path, nil, nil)
	qt.Assert(t, err, qt.Equals, errSegmentUnsupported)
	_, err = os.Stat(path)
	qt.Assert(t, os.IsNotExist(err), qt.IsTrue)

	want, _, err := (&zap.ZapPlugin{}).Merge(segs, drops, path+".zapx", nil, nil)
	qt.Assert(t, err, qt.IsNil)
	got, _, err := (&segPlugin{}).Merge(segs, drops, path, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, got, qt.DeepEquals, want)
	wb, err := os.ReadFile(path + ".zapx")
	qt.Assert(t, err, qt.IsNil)
	gb, err := os.ReadFile(path)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, bytes.Equal(sortSections(t, gb), sortSections(t, wb)), qt.IsTrue)
}

// The merges on the same segments: ten files of 1,000 messages each (the indexer's batch),
// one message in a hundred deleted, as scorch's merger finds them under a stream of mail.
func BenchmarkMergeZapx(b *testing.B) {
	benchmarkMerge(b, (&zap.ZapPlugin{}).Merge)
}

func BenchmarkMergeOurs(b *testing.B) {
	benchmarkMerge(b, func(segs []segment.Segment, drops []*roaring.Bitmap, path string, closeCh chan struct{},
		rep segment.StatsReporter) ([][]uint64, uint64, error) {
		return mergeSegments(segs, drops, path, closeCh, rep)
	})
}

func benchmarkMerge(b *testing.B, merge func([]segment.Segment, []*roaring.Bitmap, string, chan struct{},
	segment.StatsReporter) ([][]uint64, uint64, error)) {
	const segs, per = 10, 1000
	all := benchDocs(segs * per)
	dir := b.TempDir()
	var in []segment.Segment
	var drops []*roaring.Bitmap
	for i := range segs {
		s, _, err := buildSegment(analyzedDocs(all[i*per:(i+1)*per]), nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprint(i, ".zap"))
		if err := s.Persist(path); err != nil {
			b.Fatal(err)
		}
		f, err := (&zap.ZapPlugin{}).Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		in = append(in, f)
		drops = append(drops, roaring.BitmapOf(uint32(i), uint32(i+100), uint32(i+500)))
	}
	out := filepath.Join(dir, "merged.zap")
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		if _, _, err := merge(in, drops, out, nil, nil); err != nil {
			b.Fatal(err)
		}
		os.Remove(out)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*segs*per), "cpu-µs/msg")
}

// The merge's reader of a persisted segment's dictionaries (segment_merge_file.go) finds
// the terms and documents the public interfaces give, for every field it reads, in
// our segments and in zapx's (whose dictionaries hold "1-hit" values, left to the
// interfaces).
func TestFileDictionaryReadsWhatTheInterfacesGive(t *testing.T) {
	docs := analyzedDocs(randomDocs(41, 1500))
	for name, s := range map[string]segment.Segment{
		"ours":   persisted(t, ourSegment(t, docs)),
		"zapx's": persisted(t, zapxSegment(t, analyzedDocs(randomDocs(42, 200)))),
	} {
		read := 0
		for _, field := range s.Fields() {
			opts := mergeFieldOptions[field]
			if !opts.SkipFreqNorm() || opts.IncludeTermVectors() {
				continue
			}
			fd, err := openFileDict(s, field)
			qt.Assert(t, err, qt.IsNil)
			qt.Assert(t, fd, qt.IsNotNil, qt.Commentf("%s: %s", name, field))
			dict, err := s.Dictionary(field)
			qt.Assert(t, err, qt.IsNil)
			it := dict.AutomatonIterator(nil, nil, nil)
			for {
				e, err := it.Next()
				qt.Assert(t, err, qt.IsNil)
				ok, err := fd.next()
				qt.Assert(t, err, qt.IsNil)
				qt.Assert(t, ok, qt.Equals, e != nil, qt.Commentf("%s: %s", name, field))
				if e == nil {
					break
				}
				term, value := fd.current()
				qt.Assert(t, string(term), qt.Equals, e.Term)
				pl, err := dict.PostingsList(term, nil, nil)
				qt.Assert(t, err, qt.IsNil)
				want := roaring.New()
				pit := pl.Iterator(false, false, false, nil)
				for p, err := pit.Next(); p != nil || err != nil; p, err = pit.Next() {
					qt.Assert(t, err, qt.IsNil)
					want.Add(uint32(p.Number()))
				}
				if isOneHit(value) {
					qt.Assert(t, want.GetCardinality(), qt.Equals, uint64(1))
					continue
				}
				got := roaring.New()
				qt.Assert(t, fd.bitmap(value, got), qt.IsNil)
				qt.Assert(t, got.Equals(want), qt.IsTrue, qt.Commentf("%s: %s: %q", name, field, term))
				read++
			}
		}
		qt.Assert(t, read > 0, qt.IsTrue, qt.Commentf("%s: no postings read from the file", name))
	}
	// A segment still in memory has no file to read.
	fd, err := openFileDict(ourSegment(t, docs), fBody)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, fd, qt.IsNil)
}
