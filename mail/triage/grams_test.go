package triage

import (
	"slices"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/mail"
)

// TestReusedNGramsGiveTheSameVectors: a message comes out as the same vector whether each
// of its character n-grams is looked up, or taken from the vocabulary's table of its
// words' n-grams and a cache of other words' (cold, warm, and one small enough that its
// words are replaced many times).
func TestReusedNGramsGiveTheSameVectors(t *testing.T) {
	c := qt.New(t)
	m, all := modelAndTrainingSet(c)
	c.Assert(len(all) > 1000, qt.IsTrue)
	plain := newVectorizer(m.lookup)
	large, small := m.newVectorizer(newGramCache(maxCachedWords)), m.newVectorizer(newGramCache(50))
	var want, got sparse
	for pass := range 2 {
		for n := 0; n < len(all); n += 7 { // a seventh of the corpus: the test runs under -race
			e := all[n]
			plain.vector(e.In, &want)
			for _, v := range []*vectorizer{large, small} {
				v.vector(e.In, &got)
				same := slices.Equal(got.idx, want.idx) && slices.Equal(got.val, want.val)
				c.Assert(same, qt.IsTrue, qt.Commentf("pass %d, %s", pass, e.ID))
			}
		}
	}
}

// Messages analyzed at once by vectorizers sharing one small cache (so words replace
// others while they read) get the vectors of a vectorizer without one.
func TestConcurrentMessagesShareTheCacheSafely(t *testing.T) {
	c := qt.New(t)
	m, all := modelAndTrainingSet(c)
	shared := newGramCache(64)
	var wg sync.WaitGroup
	failed := make(chan string, 4)
	for w := range 4 {
		wg.Go(func() {
			plain, cached := newVectorizer(m.lookup), m.newVectorizer(shared)
			var want, got sparse
			for n := w; n < len(all); n += 29 {
				plain.vector(all[n].In, &want)
				cached.vector(all[n].In, &got)
				if !slices.Equal(got.idx, want.idx) || !slices.Equal(got.val, want.val) {
					failed <- all[n].ID
					return
				}
			}
		})
	}
	wg.Wait()
	close(failed)
	for id := range failed {
		c.Errorf("different vector for %s", id)
	}
}

// The built-in provider's one pass over a message's features for all three questions gives
// each head's own distribution, number for number.
func TestOnePassGivesEveryHeadsDistribution(t *testing.T) {
	c := qt.New(t)
	m, all := modelAndTrainingSet(c)
	v := newVectorizer(m.lookup)
	var x sparse
	outs := make([][]float64, len(m.Heads))
	for i, h := range m.Heads {
		outs[i] = make([]float64, len(h.Classes))
	}
	for n := 0; n < len(all); n += 5 {
		v.vector(all[n].In, &x)
		m.predictAll(&x, outs)
		for i, h := range m.Heads {
			want := make([]float64, len(h.Classes))
			h.predict(&x, want)
			c.Assert(outs[i], qt.DeepEquals, want, qt.Commentf("%s, head %s", all[n].ID, h.Name))
		}
	}
}

// modelAndTrainingSet loads the embedded model and the mail it was trained on.
func modelAndTrainingSet(c *qt.C) (*Model, []Example) {
	m, err := LoadModel(embeddedModel)
	c.Assert(err, qt.IsNil)
	all, err := LoadTrainingSet("../../fixtures/triage/corpus.jsonl", "../../fixtures/triage/written/*.jsonl", mail.HTMLToText)
	c.Assert(err, qt.IsNil)
	return m, all
}

// A Builtin keeps only what prediction reads of its model, and answers as the model's
// heads do, each with its own weights; the model it was made from stays whole (the
// evaluation goes on using and retraining it).
func TestBuiltinAnswersAsItsModelsHeads(t *testing.T) {
	c := qt.New(t)
	m, all := modelAndTrainingSet(c)
	before, err := m.Encode()
	c.Assert(err, qt.IsNil)
	b := NewBuiltinModel(m)
	c.Assert(b.model.Features, qt.IsNil)
	for _, h := range b.model.Heads {
		c.Assert(h.Weights, qt.IsNil)
	}
	v := newVectorizer(m.lookup)
	var x sparse
	for n := 0; n < len(all); n += 7 {
		got := b.Predict(all[n].In)
		want := Scores{InputTokens: int64(v.vector(all[n].In, &x))}
		probs := make([][]float64, len(m.Heads))
		for i, h := range m.Heads {
			probs[i] = make([]float64, len(h.Classes))
			h.predict(&x, probs[i])
		}
		copy(want.Category[:], probs[HeadCategory])
		want.NeedsReply = probs[HeadReply][1]
		copy(want.Urgency[:], probs[HeadUrgency])
		c.Assert(got, qt.DeepEquals, want, qt.Commentf("%s", all[n].ID))
	}
	after, err := m.Encode()
	c.Assert(err, qt.IsNil)
	c.Assert(after, qt.DeepEquals, before)
}

// A burst of Predicts at once leaves a bounded number of scratches held for good.
func TestBuiltinKeepsBoundedScratches(t *testing.T) {
	c := qt.New(t)
	b, err := NewBuiltin()
	c.Assert(err, qt.IsNil)
	held := make([]*scratch, 4*maxFree())
	for i := range held {
		held[i] = b.scratch()
	}
	for _, s := range held {
		b.done(s)
	}
	c.Assert(b.free, qt.HasLen, maxFree())
	// Those kept are used again, not made anew.
	c.Assert(b.scratch(), qt.Equals, held[maxFree()-1])
}
