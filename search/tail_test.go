package search

import (
	"context"
	"math"
	"testing"

	qt "github.com/frankban/quicktest"
)

// A search over an index and a tail of new messages finds what a search over an index
// holding all of them finds, in the same order with the same scores: the tail's
// documents are matched on their text and weighed as if indexed.
func TestTailSearchesAsTheIndex(t *testing.T) {
	gen := newDocGen(11)
	all := []*Doc{}
	for id := int64(1); id <= 160; id++ {
		all = append(all, gen.doc(id))
	}
	full, part := indexOf(t, all...), indexOf(t, all[:100]...)
	tl := &tail{ids: map[int64]bool{}}
	for _, d := range all[100:] {
		tl.ids[d.ID] = true
		tl.docs = append(tl.docs, *d)
	}
	confirm := func(_ context.Context, ids []int64) ([]Doc, error) {
		var out []Doc
		for _, id := range ids {
			out = append(out, *all[id-1])
		}
		return out, nil
	}
	queries := []string{"red", "apple pear", `"red apple"`, "-red", "red OR sky", "from:alice", "has:attachment",
		`subject:"weekly report"`, `"the of report"`, "march -has:attachment", "to:acme.com OR invoice"}
	for range 20 {
		queries = append(queries, gen.words(1+gen.rng.IntN(2)), `"`+gen.words(2)+`"`)
	}
	for _, qs := range queries {
		req := Request{Inbox: 1, Query: Parse(qs), Limit: 1000}
		want, err := full.search(context.Background(), req, 1001, confirm, nil)
		qt.Assert(t, err, qt.IsNil)
		got, err := part.search(context.Background(), req, 1001, confirm, tl)
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, len(got), qt.Equals, len(want), qt.Commentf("query %s", qs))
		for i := range want {
			qt.Assert(t, got[i].ID, qt.Equals, want[i].ID, qt.Commentf("query %s, hit %d", qs, i))
			qt.Assert(t, math.Abs(got[i].Score-want[i].Score) < 1e-9, qt.IsTrue, qt.Commentf("query %s, hit %d", qs, i))
		}
	}
}

// The tail hides what the index still holds of its messages: a changed message is found
// by what it says now, a removed one not at all, and the filters apply to it.
func TestTailHidesWhatTheIndexHolds(t *testing.T) {
	ix := indexOf(t,
		&Doc{ID: 1, Inbox: 1, TS: 1000, Subject: "Quarterly plan"},
		&Doc{ID: 2, Inbox: 1, TS: 2000, Subject: "Plan for lunch"},
		&Doc{ID: 3, Inbox: 1, TS: 3000, Subject: "Travel plan", Category: "personal"})

	tl := &tail{ids: map[int64]bool{1: true, 2: true, 4: true}, docs: []Doc{
		{ID: 1, Inbox: 1, TS: 1000, Subject: "Quarterly plan", Category: "work"}, // triaged since
		{ID: 4, Inbox: 1, TS: 4000, Subject: "New plan", Category: "work"},       // new
		{ID: 9, Inbox: 2, TS: 5000, Subject: "Plan elsewhere"},                   // another inbox's
	}} // 2 is no longer searchable (trashed)
	ids := func(f Filter) []int64 {
		hits, _, err := ix.searchPage(context.Background(), Request{Inbox: 1, Query: Parse("plan"), Filter: f, Limit: 10}, nil, tl)
		qt.Assert(t, err, qt.IsNil)
		out := []int64{}
		for _, h := range hits {
			out = append(out, h.ID)
		}
		return out
	}
	qt.Assert(t, ids(Filter{}), qt.DeepEquals, []int64{4, 3, 1})
	qt.Assert(t, ids(Filter{Category: "work"}), qt.DeepEquals, []int64{4, 1})
	qt.Assert(t, ids(Filter{Category: "personal"}), qt.DeepEquals, []int64{3})
}
