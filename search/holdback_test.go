package search

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestHoldBackFreshMailAwaitingTriage checks when the indexer leaves changes for the next
// tick: from the first new change whose message awaits triage, only when nobody waits and
// the batch is not full, and each change at most once.
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

	x := &Indexer{opt: Options{BatchSize: 10}}
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
	x = &Indexer{opt: Options{BatchSize: 10}}
	now, held = x.holdBack(changes, byID, true)
	qt.Assert(t, held, qt.IsFalse)
	qt.Assert(t, seqs(now), qt.DeepEquals, []int64{1, 2, 3, 4})
	// So does an indexer behind the queue (a full batch): holding back would slow catching up.
	x = &Indexer{opt: Options{BatchSize: 4}}
	now, held = x.holdBack(changes, byID, false)
	qt.Assert(t, held, qt.IsFalse)
	qt.Assert(t, seqs(now), qt.DeepEquals, []int64{1, 2, 3, 4})
}
