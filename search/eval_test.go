package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

func applyWait(t *testing.T, ix *Index, bt *Batch, seq int64) {
	t.Helper()
	done := make(chan error, 1)
	qt.Assert(t, ix.Apply(bt, seq, "s", func(err error) { done <- err }), qt.IsNil)
	qt.Assert(t, <-done, qt.IsNil)
}

// indexOf is a new index in a test directory holding docs.
func indexOf(t *testing.T, docs ...*Doc) *Index {
	t.Helper()
	ix, _, err := Open(filepath.Join(t.TempDir(), "x.index"))
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { ix.Close() })
	bt := ix.NewBatch()
	for _, d := range docs {
		bt.Put(d)
	}
	applyWait(t, ix, bt, 1)
	return ix
}

// The bitmap evaluator finds exactly the messages the query language says match (as
// Query.matches evaluates it on the text), over several segments with updates and deletes,
// and returns them in result order.
func TestSearchMatchesTextEvaluation(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testMatchesText(t, seed) })
	}
}

// docGen makes random messages over a small vocabulary, so queries match many of them.
type docGen struct {
	rng *rand.Rand
}

var (
	genVocab  = strings.Fields("red apple green pear blue sky the of report weekly invoice march plan")
	genPeople = []string{"Alice Smith <alice@acme.com>", "bob@globex.io", "Carol <carol@mail.acme.com>"}
)

func newDocGen(seed uint64) *docGen { return &docGen{rng: rand.New(rand.NewPCG(seed, 7))} }

func (g *docGen) words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = genVocab[g.rng.IntN(len(genVocab))]
	}
	return strings.Join(w, " ")
}

// doc is a message of inbox 1 (three in four) or 2.
func (g *docGen) doc(id int64) *Doc {
	rng := g.rng
	d := &Doc{ID: id, Inbox: 1 + int64(rng.IntN(4)/3), TS: int64(rng.IntN(20)) * 1000, Subject: g.words(1 + rng.IntN(3)),
		From: genPeople[rng.IntN(3)], To: []string{genPeople[rng.IntN(3)]}, Body: g.words(rng.IntN(30))}
	if rng.IntN(4) == 0 {
		d.Attachments = []string{"file-" + genVocab[rng.IntN(len(genVocab))] + ".pdf"}
	}
	return d
}

func testMatchesText(t *testing.T, seed uint64) {
	ix, _, err := Open(filepath.Join(t.TempDir(), "x.index"))
	qt.Assert(t, err, qt.IsNil)
	defer ix.Close()
	gen := newDocGen(seed)
	rng, words := gen.rng, gen.words
	docs := map[int64]*Doc{}
	seq := int64(0)
	for round := 0; round < 4; round++ {
		bt := ix.NewBatch()
		for i := 0; i < 60; i++ {
			d := gen.doc(int64(rng.IntN(150) + 1)) // some are updates of earlier ones
			id := d.ID
			if old, ok := docs[id]; ok {
				bt.Delete(old.TS, old.ID)
			}
			bt.Put(d)
			docs[id] = d
		}
		for i := 0; i < 5; i++ {
			id := int64(rng.IntN(150) + 1)
			if old, ok := docs[id]; ok {
				bt.Delete(old.TS, old.ID)
				delete(docs, id)
			}
		}
		seq++
		applyWait(t, ix, bt, seq)
	}
	confirm := func(_ context.Context, ids []int64) ([]Doc, error) {
		var out []Doc
		for _, id := range ids {
			if d, ok := docs[id]; ok {
				out = append(out, *d)
			}
		}
		return out, nil
	}
	queries := []string{"red", "apple pear", `"red apple"`, `"the of report"`, "-red", "red OR sky", `-"blue sky" green`,
		"from:alice", "to:acme.com", `subject:"weekly report"`, "has:attachment", "file-red.pdf", "apple -has:attachment",
		`"green pear" OR invoice`, "red OR -apple", "march from:carol", `"report weekly"`, "smith", "of the",
		`-"the of" report`, `sky OR -"red apple"`, `-"green pear" -"blue sky" -march`, `subject:"red apple" OR "pear blue"`}
	for i := 0; i < 30; i++ {
		queries = append(queries, fmt.Sprintf(`"%s"`, words(2+rng.IntN(2))), words(1+rng.IntN(2)))
	}
	for _, qs := range queries {
		q := Parse(qs)
		var want []int64
		for id, d := range docs {
			if d.Inbox == 1 && q.matches(d) {
				want = append(want, id)
			}
		}
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		hits, err := ix.search(context.Background(), Request{Inbox: 1, Query: q, Limit: 1000}, 1001, confirm, nil)
		qt.Assert(t, err, qt.IsNil)
		var got []int64
		for i, h := range hits {
			got = append(got, h.ID)
			qt.Assert(t, h.TS, qt.Equals, docs[h.ID].TS)
			if i > 0 {
				qt.Assert(t, hits[i-1].before(h), qt.IsTrue, qt.Commentf("%s: order at %d", qs, i))
			}
		}
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if want == nil {
			want = []int64{}
		}
		if got == nil {
			got = []int64{}
		}
		qt.Assert(t, got, qt.DeepEquals, want, qt.Commentf("query %s", qs))

		// Paging in small pages gives the same hits in the same order.
		var paged []Hit
		var after *Hit
		for {
			page, more, err := ix.searchPage(context.Background(), Request{Inbox: 1, Query: q, Limit: 7, After: after}, confirm, nil)
			qt.Assert(t, err, qt.IsNil)
			paged = append(paged, page...)
			if !more {
				break
			}
			after = &page[len(page)-1]
		}
		qt.Assert(t, len(paged), qt.Equals, len(hits), qt.Commentf("query %s", qs))
		for i := range paged {
			qt.Assert(t, paged[i], qt.Equals, hits[i], qt.Commentf("query %s", qs))
		}
	}
}

// Only the pair filter stands between a body phrase and a message holding its words apart:
// without a check against the text, the index still tells them apart.
func TestBodyPhraseFromPairFilter(t *testing.T) {
	ix := indexOf(t,
		&Doc{ID: 1, Inbox: 1, TS: 1, Body: "I like the red apple."},
		&Doc{ID: 2, Inbox: 1, TS: 2, Body: "An apple, red and ripe."},
		&Doc{ID: 3, Inbox: 1, TS: 3, Body: "Mail alice@example.com wrote"})
	for _, tc := range []struct {
		q    string
		want []int64
	}{
		{`"red apple"`, []int64{1}},
		{`"apple red"`, []int64{2}},
		{`"apple, red"`, []int64{2}},
		{`"the red apple"`, []int64{1}},
		{`"like red"`, []int64{}},
		{`"example.com wrote"`, []int64{3}},
		{`-"red apple" apple`, []int64{2}},
	} {
		hits, _, err := ix.Search(context.Background(), Request{Inbox: 1, Query: Parse(tc.q), Limit: 10})
		qt.Assert(t, err, qt.IsNil)
		got := []int64{}
		for _, h := range hits {
			got = append(got, h.ID)
		}
		qt.Check(t, got, qt.DeepEquals, tc.want, qt.Commentf("%s", tc.q))
	}
}

func TestBloom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pairs []uint64
	for i := 0; i < 500; i++ {
		pairs = append(pairs, pairHash(fmt.Sprint("w", rng.IntN(1000)), fmt.Sprint("w", rng.IntN(1000))))
	}
	f := newBloom(pairs)
	for _, h := range pairs {
		qt.Assert(t, bloomHas(f, h), qt.IsTrue)
	}
	fp := 0
	for i := 0; i < 10000; i++ {
		if bloomHas(f, pairHash(fmt.Sprint("x", i), "y")) {
			fp++
		}
	}
	qt.Assert(t, fp < 400, qt.IsTrue, qt.Commentf("%d false positives in 10000", fp))
	qt.Assert(t, bloomHas(nil, pairs[0]), qt.IsFalse)
}
