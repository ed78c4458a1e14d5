package search

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/index/scorch/mergeplan"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
	qt "github.com/frankban/quicktest"
)

// analyzedDocs builds and analyzes the documents of ds as scorch does before handing them
// to the segment plugin.
func analyzedDocs(ds []*Doc) []index.Document {
	an := newAnalysis()
	out := make([]index.Document, len(ds))
	for i, d := range ds {
		doc := d.document(an)
		doc.AddIDField()
		analyzeDoc(doc)
		out[i] = doc
	}
	return out
}

func analyzeDoc(doc *document.Document) {
	doc.VisitFields(func(f index.Field) {
		if f.Options().IsIndexed() {
			f.Analyze()
		}
	})
}

// segmentBytes is the file zapx would persist for sb.
func segmentBytes(t testing.TB, sb *zap.SegmentBase) []byte {
	var buf bytes.Buffer
	_, err := sb.WriteTo(&buf)
	qt.Assert(t, err, qt.IsNil)
	b := buf.Bytes()
	// The footer's CRC covers everything before it.
	qt.Assert(t, binary.BigEndian.Uint32(b[len(b)-4:]), qt.Equals, crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

// sortSections puts the section addresses of each field of a segment file in ascending
// order of section, and recomputes the CRC: zapx writes them in Go's random map order.
func sortSections(t testing.TB, b []byte) []byte {
	b = slices.Clone(b)
	footer := len(b) - zap.FooterSize // the writer id is empty
	sectionsIndex := binary.BigEndian.Uint64(b[footer+4+8+8:])
	p := int(sectionsIndex)
	nFields, n := binary.Uvarint(b[p:])
	p += n
	for i := 0; i < int(nFields); i++ {
		f := int(binary.BigEndian.Uint64(b[p+8*i:]))
		l, n := binary.Uvarint(b[f:])
		f += n + int(l)
		_, n = binary.Uvarint(b[f:]) // options
		f += n
		nSec, n := binary.Uvarint(b[f:])
		f += n
		pairs := make([][]byte, nSec)
		for j := range pairs {
			pairs[j] = slices.Clone(b[f+10*j : f+10*j+10])
		}
		slices.SortFunc(pairs, bytes.Compare)
		copy(b[f:], bytes.Join(pairs, nil))
	}
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

// checkSameSegment builds the segment of docs with zapx and with buildSegment and
// requires the same file.
func checkSameSegment(t testing.TB, docs []index.Document) {
	t.Helper()
	want, _, err := (&zap.ZapPlugin{}).New(docs)
	qt.Assert(t, err, qt.IsNil)
	got, size, err := buildSegment(docs, nil, nil)
	qt.Assert(t, err, qt.IsNil)
	wb := sortSections(t, segmentBytes(t, want.(*zap.SegmentBase)))
	gb := segmentBytes(t, got)
	qt.Assert(t, size, qt.Equals, uint64(len(gb)-zap.FooterSize))
	if !bytes.Equal(gb, wb) {
		i := 0
		for i < len(gb) && i < len(wb) && gb[i] == wb[i] {
			i++
		}
		t.Fatalf("%d documents: segments differ from byte %d (sizes %d and %d)", len(docs), i, len(gb), len(wb))
	}
	qt.Assert(t, got.Count(), qt.Equals, uint64(len(docs)))
}

// randomDoc makes a message with the edge cases of each field: empty, unicode, past the
// caps (one text in longOdds).
func randomDoc(rng *rand.Rand, id int64, longOdds int) *Doc {
	text := func(max int) string {
		switch {
		case rng.IntN(8) == 0:
			return ""
		case rng.IntN(longOdds) == 0:
			var b strings.Builder
			for b.Len() < max+100 {
				b.WriteString(randomText(rng))
				b.WriteString(" ")
			}
			return b.String()
		default:
			return randomText(rng)
		}
	}
	d := &Doc{ID: id, Inbox: rng.Int64N(5), TS: rng.Int64N(4e12) - 1e12,
		Subject: text(MaxSubject), From: text(MaxFrom), Body: text(MaxBody)}
	for range rng.IntN(4) {
		d.To = append(d.To, text(MaxTo/2))
	}
	for range rng.IntN(3) {
		d.Attachments = append(d.Attachments, randomText(rng)+".pdf")
	}
	if rng.IntN(3) == 0 {
		d.Category, d.NeedsReply, d.Urgency = []string{"billing", "support", "other"}[rng.IntN(3)], "yes", fmt.Sprint(rng.IntN(4))
	}
	return d
}

// randomDocs makes n messages, about 20 of them with texts past the caps (they are what
// makes the tests slow).
func randomDocs(seed uint64, n int) []*Doc {
	rng := rand.New(rand.NewPCG(seed, 11))
	ds := make([]*Doc, n)
	for i := range ds {
		ds[i] = randomDoc(rng, int64(i+1), max(2, n/20))
	}
	return ds
}

// Our segments are byte for byte zapx's for the same documents, across zapx's chunk size
// (1,024 postings) and bitmap container (4,096) boundaries.
func TestSegmentSameAsZapx(t *testing.T) {
	for i, n := range []int{1, 2, 3, 1023, 1024, 1025, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			checkSameSegment(t, analyzedDocs(randomDocs(uint64(i), n)))
		})
	}
	// Keywords of every message (inbox, day) make terms of 5,000 postings: several
	// chunks and a bitmap container.
	t.Run("dense", func(t *testing.T) {
		ds := make([]*Doc, 5000)
		for i := range ds {
			ds[i] = &Doc{ID: int64(i), Inbox: 1, TS: 1.7e12, Subject: fmt.Sprintf("w%d common", i%7), Body: "x"}
		}
		checkSameSegment(t, analyzedDocs(ds))
	})
	t.Run("empty", func(t *testing.T) {
		checkSameSegment(t, analyzedDocs([]*Doc{{ID: 1}, {ID: 2, Body: "a"}}))
	})
}

// A batch the builder does not handle is refused, and the plugin builds it with zapx.
func TestSegmentRefusesOthers(t *testing.T) {
	// Each change adds an analyzed field to the second document.
	textField := func(name string, opts index.FieldIndexingOptions, ap []uint64) *document.TextField {
		f := document.NewTextFieldCustom(name, ap, []byte("value"), opts, nil)
		f.Analyze()
		return f
	}
	cases := map[string]func(*document.Document){
		"doc values":      func(d *document.Document) { d.AddField(textField("dv", index.IndexField|index.DocValues, nil)) },
		"array positions": func(d *document.Document) { d.AddField(textField("ap", index.IndexField, []uint64{1})) },
		"repeated field":  func(d *document.Document) { d.AddField(textField(fInbox, index.IndexField, nil)) },
		"other field type": func(d *document.Document) {
			f := document.NewNumericField("num", nil, 42)
			f.Analyze()
			d.AddField(f)
		},
		"composite": func(d *document.Document) {
			d.AddField(document.NewCompositeField("_all", true, nil, nil))
		},
		"location of another field": func(d *document.Document) {
			f := textField("loc", index.IndexField|index.IncludeTermVectors, nil)
			f.AnalyzedTokenFrequencies()["value"].Locations[0].Field = fSubject
			d.AddField(f)
		},
		"no stored id": func(d *document.Document) {
			d.Fields = slices.DeleteFunc(d.Fields, func(f document.Field) bool { return f.Name() == "_id" })
			d.AddField(textField("_id", index.IndexField, nil))
		},
	}
	// A batch that could fill a bitmap container (roaring would make it a run).
	_, _, err := buildSegment(make([]index.Document, 1<<16), nil, nil)
	qt.Assert(t, err, qt.Equals, errSegmentUnsupported)
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			// New documents for each build: zapx merges a repeated field's frequencies
			// into the first one's.
			docs := func() []index.Document {
				docs := analyzedDocs(randomDocs(9, 3))
				change(docs[1].(*document.Document))
				return docs
			}
			_, _, err := buildSegment(docs(), nil, nil)
			qt.Assert(t, err, qt.Equals, errSegmentUnsupported)
			if name == "no stored id" {
				return // zapx cannot build it either
			}
			want, _, err := (&zap.ZapPlugin{}).New(docs())
			qt.Assert(t, err, qt.IsNil)
			got, _, err := (&segPlugin{}).New(docs())
			qt.Assert(t, err, qt.IsNil)
			qt.Assert(t, bytes.Equal(sortSections(t, segmentBytes(t, got.(*zap.SegmentBase))),
				sortSections(t, segmentBytes(t, want.(*zap.SegmentBase)))), qt.IsTrue)
		})
	}
}

// appendRoaring writes what roaring writes for the same numbers, across containers and
// every container kind (full containers are runs).
func TestAppendRoaring(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 4095, 4096, 4097, 9000, 65535, 65536, 70000, 1 << 18} {
		for _, span := range []uint32{uint32(n), 1 << 16, 1 << 17, 1 << 18} {
			seen := map[uint32]bool{}
			var docs []uint32
			for len(docs) < n && len(docs) < int(span) {
				d := rng.Uint32N(span)
				if !seen[d] {
					seen[d] = true
					docs = append(docs, d)
				}
			}
			slices.Sort(docs)
			refs := make([]segRef, len(docs))
			for i, d := range docs {
				refs[i].doc = d
			}
			bm := roaring.New() // as zapx builds it
			for _, d := range docs {
				bm.Add(d)
			}
			want, err := bm.ToBytes()
			qt.Assert(t, err, qt.IsNil)
			got := appendRoaring(nil, refs)
			l, k := binary.Uvarint(got)
			qt.Assert(t, int(l), qt.Equals, len(got)-k)
			qt.Assert(t, bytes.Equal(got[k:], want), qt.IsTrue, qt.Commentf("%d numbers in %d", n, span))
		}
	}
}

// benchDocs makes n messages like the search benchmark's: 1-4 KB bodies of words drawn
// with a Zipf law from the common words and 60,000 others.
func benchDocs(n int) []*Doc {
	rng := rand.New(rand.NewPCG(5, 6))
	vocab := slices.Clone(commonList)
	for i := 0; len(vocab) < 60000; i++ {
		w := make([]byte, 3+rng.IntN(8))
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		vocab = append(vocab, string(w))
	}
	zipf := rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))
	words := func(size int) string {
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(vocab[zipf.Uint64()])
			b.WriteString([]string{" ", " ", " ", ", ", ". "}[rng.IntN(5)])
		}
		return b.String()
	}
	ds := make([]*Doc, n)
	for i := range ds {
		from := fmt.Sprintf("%s %s <%s@%s.com>", vocab[rng.IntN(2000)], vocab[rng.IntN(2000)], vocab[rng.IntN(500)], vocab[rng.IntN(300)])
		ds[i] = &Doc{ID: int64(i + 1), Inbox: 1, TS: 1.7e12 + int64(i)*60000, Subject: words(40), From: from,
			To: []string{"me@example.com"}, Body: words(1024 + rng.IntN(3072))}
		if rng.IntN(10) == 0 {
			ds[i].Attachments = []string{vocab[rng.IntN(len(vocab))] + ".pdf"}
		}
		if rng.IntN(3) > 0 {
			ds[i].Category, ds[i].NeedsReply, ds[i].Urgency = "billing", "yes", "high"
		}
	}
	return ds
}

// The builders on the same analyzed documents (a rebuild's batch of 2,000 messages).
func BenchmarkSegmentZapx(b *testing.B) {
	benchmarkSegment(b, func(docs []index.Document) error {
		_, _, err := (&zap.ZapPlugin{}).New(docs)
		return err
	})
}

func BenchmarkSegmentOurs(b *testing.B) {
	benchmarkSegment(b, func(docs []index.Document) error {
		_, _, err := buildSegment(docs, nil, nil)
		return err
	})
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchmarkSegment(b *testing.B, build func([]index.Document) error) {
	docs := analyzedDocs(benchDocs(RebuildBatch))
	postings := 0
	for _, d := range docs {
		d.VisitFields(func(f index.Field) { postings += len(f.AnalyzedTokenFrequencies()) })
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		if err := build(docs); err != nil {
			b.Fatal(err)
		}
	}
	// CPU time (with the GC's) is what matters on a loaded machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*len(docs)), "cpu-µs/msg")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(docs)), "µs/msg")
	b.ReportMetric(float64(postings)/float64(len(docs)), "postings/msg")
}

// An index of our plugin answers every search as one of zapx's plugin (bleve's public
// path), before and after its segments are persisted, merged and reopened.
func TestIndexSameAsWithZapx(t *testing.T) {
	ds := randomDocs(21, 900)
	byID := map[int64]*Doc{}
	for _, d := range ds {
		byID[d.ID] = d
	}
	build := func(path, segType string) *Index {
		ix, _, err := openWith(path, segType)
		qt.Assert(t, err, qt.IsNil)
		for i := 0; i < len(ds); i += 300 {
			bt := ix.NewBatch()
			for _, d := range ds[i : i+300] {
				bt.Put(d)
			}
			if i > 0 { // deletes of messages in the segments before
				bt.Delete(ds[i-7].TS, ds[i-7].ID)
				bt.Delete(ds[i/2].TS, ds[i/2].ID)
			}
			applyWait(t, ix, bt, int64(i+1))
		}
		return ix
	}
	dir := t.TempDir()
	ref := build(filepath.Join(dir, "zapx.index"), "zap")
	ours := build(filepath.Join(dir, "ours.index"), segPluginType)

	confirm := func(_ context.Context, ids []int64) ([]Doc, error) {
		var out []Doc
		for _, id := range ids {
			out = append(out, *byID[id])
		}
		return out, nil
	}
	queries := []string{"the", "alice example", `"let me know"`, `"follow up"`, "from:alice", "to:example.com",
		"has:attachment", "café", "東京", "-the", "naïve OR istanbul", `subject:"in you"`, "v1 -mail", "zzzz",
		"x.pdf", `"of and"`, "ｶﾀｶﾅ", "me -know", "org co uk"}
	compare := func() {
		t.Helper()
		hits := 0
		for _, qs := range queries {
			for inbox := int64(0); inbox < 5; inbox++ {
				req := Request{Inbox: inbox, Query: Parse(qs), Limit: 1000}
				want, err := ref.search(context.Background(), req, 1001, confirm, nil)
				qt.Assert(t, err, qt.IsNil)
				got, err := ours.search(context.Background(), req, 1001, confirm, nil)
				qt.Assert(t, err, qt.IsNil)
				qt.Assert(t, got, qt.DeepEquals, want, qt.Commentf("%s in inbox %d", qs, inbox))
				hits += len(want)
			}
		}
		qt.Assert(t, hits > 2000, qt.IsTrue, qt.Commentf("%d hits", hits))
	}
	compare()
	// Each merged into one segment, by zapx.
	forceMerge := func(ix *Index) {
		adv, err := ix.b.Advanced()
		qt.Assert(t, err, qt.IsNil)
		sc, ok := adv.(*scorch.Scorch)
		qt.Assert(t, ok, qt.IsTrue)
		qt.Assert(t, sc.ForceMerge(context.Background(), &mergeplan.SingleSegmentMergePlanOptions), qt.IsNil)
	}
	forceMerge(ref)
	forceMerge(ours)
	compare()
	qt.Assert(t, ref.Close(), qt.IsNil)
	qt.Assert(t, ours.Close(), qt.IsNil)
	var err error
	ref, _, err = Open(filepath.Join(dir, "zapx.index"))
	qt.Assert(t, err, qt.IsNil)
	defer ref.Close()
	ours, _, err = Open(filepath.Join(dir, "ours.index"))
	qt.Assert(t, err, qt.IsNil)
	defer ours.Close()
	compare()
}

// zapx merges our segments into the file it makes of its own, with deleted documents.
func TestSegmentMergesAsZapx(t *testing.T) {
	batches := [][]index.Document{analyzedDocs(randomDocs(31, 300)), analyzedDocs(randomDocs(32, 1030))}
	drops := []*roaring.Bitmap{roaring.BitmapOf(0, 5, 299), roaring.BitmapOf(3, 1024, 1025)}
	dir := t.TempDir()
	merge := func(name string, build func([]index.Document) (segment.Segment, error)) ([]byte, [][]uint64) {
		var segs []segment.Segment
		for _, docs := range batches {
			s, err := build(docs)
			qt.Assert(t, err, qt.IsNil)
			segs = append(segs, s)
		}
		path := filepath.Join(dir, name)
		nums, _, err := (&zap.ZapPlugin{}).Merge(segs, drops, path, nil, nil)
		qt.Assert(t, err, qt.IsNil)
		b, err := os.ReadFile(path)
		qt.Assert(t, err, qt.IsNil)
		return sortSections(t, b), nums
	}
	want, wantNums := merge("zapx.zap", func(docs []index.Document) (segment.Segment, error) {
		s, _, err := (&zap.ZapPlugin{}).New(docs)
		return s, err
	})
	got, gotNums := merge("ours.zap", func(docs []index.Document) (segment.Segment, error) {
		s, _, err := buildSegment(docs, nil, nil)
		return s, err
	})
	qt.Assert(t, gotNums, qt.DeepEquals, wantNums)
	qt.Assert(t, bytes.Equal(got, want), qt.IsTrue)
}

// A build sizes its buffers from the last one (sizeFor): postings with the documents, but
// distinct terms not up from a smaller batch, so a batch of one message after an idle
// spell does not size the next large batch's terms for thousands of times its own.
func TestBuildSizesFollowTheLastBuild(t *testing.T) {
	docs := analyzedDocs(benchDocs(400))
	var mem buildMemory
	_, _, err := buildSegment(docs[:1], nil, &mem)
	qt.Assert(t, err, qt.IsNil)
	one := mem.get()
	b := newBuilder()
	b.sizeFor(400, one)
	qt.Assert(t, cap(b.terms), qt.Equals, one.terms*5/4)
	qt.Assert(t, cap(b.postings), qt.Equals, one.postings*400*5/4)

	_, _, err = buildSegment(docs, nil, &mem)
	qt.Assert(t, err, qt.IsNil)
	all := mem.get()
	b = newBuilder()
	b.sizeFor(400, all)
	qt.Assert(t, cap(b.postings) >= all.postings, qt.IsTrue)
	qt.Assert(t, cap(b.terms) >= all.terms, qt.IsTrue)
	for name, n := range all.fieldTerms {
		qt.Assert(t, b.fieldTerms[name] >= n, qt.IsTrue, qt.Commentf("field %s", name))
	}
}
