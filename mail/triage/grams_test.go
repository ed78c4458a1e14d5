package triage

import (
	"slices"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/mail"
)

// TestReusedNGramsGiveTheSameVectors: a message comes out as the same vector whether each
// of its character n-grams is looked up, or taken from the vocabulary's table of its
// words' n-grams and a cache of other words' (cold, warm, and one small enough to start
// over many times).
func TestReusedNGramsGiveTheSameVectors(t *testing.T) {
	c := qt.New(t)
	m, err := LoadModel(embeddedModel)
	c.Assert(err, qt.IsNil)
	all, err := LoadTrainingSet("../../fixtures/triage/corpus.jsonl", "../../fixtures/triage/written/*.jsonl", mail.HTMLToText)
	c.Assert(err, qt.IsNil)
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
