package search

import (
	"context"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestHoldBackFreshMailAwaitingTriage checks which changes the indexer leaves for the next
// tick: from the first new change whose message awaits triage, never when it must apply
// everything (a search waits, or it is behind the queue), and each change at most once.
func TestHoldBackFreshMailAwaitingTriage(t *testing.T) {
	changes := []Change{{Seq: 1, Message: 1}, {Seq: 2, Message: 2}, {Seq: 3, Message: 3}, {Seq: 4, Message: 0, Inbox: 9}}
	byID := map[int64]*Doc{1: {ID: 1}, 2: {ID: 2, TriagePending: true}, 3: {ID: 3}}
	seqs := func(cs []Change) []int64 {
		out := []int64{}
		for _, c := range cs {
			out = append(out, c.Seq)
		}
		return out
	}

	x := &Indexer{}
	now, held := x.holdBack(changes, byID, false)
	qt.Assert(t, held, qt.IsTrue)
	qt.Assert(t, seqs(now), qt.DeepEquals, []int64{1})
	// At the next tick the same changes are no longer new: nothing is held back again.
	now, held = x.holdBack(changes[1:], byID, false)
	qt.Assert(t, held, qt.IsFalse)
	qt.Assert(t, seqs(now), qt.DeepEquals, []int64{2, 3, 4})
	// New changes behind them may be.
	more := append(changes[1:], Change{Seq: 5, Message: 5}, Change{Seq: 6, Message: 6})
	byID[5], byID[6] = &Doc{ID: 5, TriagePending: true}, &Doc{ID: 6}
	now, held = x.holdBack(more, byID, false)
	qt.Assert(t, held, qt.IsTrue)
	qt.Assert(t, seqs(now), qt.DeepEquals, []int64{2, 3, 4})

	// A waiting search gets everything.
	x = &Indexer{}
	now, held = x.holdBack(changes, byID, true)
	qt.Assert(t, held, qt.IsFalse)
	qt.Assert(t, seqs(now), qt.DeepEquals, []int64{1, 2, 3, 4})
}

// bigMail is a Source whose every message has a large body (one shared string).
type bigMail struct {
	Source
	body  string
	reads int
}

func (b *bigMail) Docs(_ context.Context, ids []int64) ([]Doc, error) {
	b.reads++
	out := make([]Doc, len(ids))
	for i, id := range ids {
		out[i] = Doc{ID: id, Body: b.body}
	}
	return out, nil
}

// TestDocsForStopsAtTheBudget: a step over large mail reads documents a chunk at a time
// and stops once it holds docBudget of text, applying only the changes they cover.
func TestDocsForStopsAtTheBudget(t *testing.T) {
	src := &bigMail{body: strings.Repeat("x", docBudget/docChunk*2)}
	x := &Indexer{src: src}
	var changes []Change
	for i := int64(1); i <= 3*docChunk; i++ {
		changes = append(changes, Change{Seq: i, Message: i})
	}
	byID, covered, err := x.docsFor(context.Background(), changes)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, covered, qt.HasLen, docChunk)
	qt.Assert(t, byID, qt.HasLen, docChunk)
	qt.Assert(t, src.reads, qt.Equals, 1)

	src.body = "small"
	_, covered, err = x.docsFor(context.Background(), changes)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, covered, qt.HasLen, len(changes))
}
