package triage

import (
	"slices"
	"strings"
	"sync"
)

// Character n-grams are most of a message's features and most of the lookups that find
// them: a word of six letters has 21 to look up ("^wo", ..., "ord$"), and most are in the
// vocabulary, so the Bloom filter cannot answer them and each costs a probe of the feature
// table and a comparison with the feature's text, cache misses on a busy machine (about
// 300 us of a 2 KB message's 330, BENCHMARKS.md "The house"). A word's n-grams depend on
// the word alone, so they are looked up once per word: for the vocabulary's words when the
// model loads (gramTable), for other words the first time a vectorizer meets them
// (gramCache). Both give the features the lookups would, in the same order.

// gramTable holds the character n-gram features of every word of the vocabulary, by the
// word's feature ("w:" and the word), built once with the model and only read afterwards.
type gramTable struct {
	first int32   // the first word feature
	start []int32 // word feature first+k has grams[start[k]:start[k+1]]
	grams []int32
}

// newGramTable looks up the n-grams of each word feature of features (sorted, so the
// word features are one run) with gramsOf.
func newGramTable(features []string, gramsOf func(word []byte) []int32) *gramTable {
	t := &gramTable{first: -1}
	for i, f := range features {
		word, ok := strings.CutPrefix(f, "w:")
		if !ok {
			continue
		}
		if t.first < 0 {
			t.first = int32(i)
		}
		for int(t.first)+len(t.start) <= i { // any other features amid the words: none
			t.start = append(t.start, int32(len(t.grams)))
		}
		t.grams = append(t.grams, gramsOf([]byte(word))...)
	}
	t.start = append(t.start, int32(len(t.grams)))
	return t
}

// of returns the n-gram features of the word whose word feature is feature, when known
// says the vocabulary has that word and the table is there.
func (t *gramTable) of(feature int32, known bool) ([]int32, bool) {
	if t == nil || !known {
		return nil, false
	}
	k := int(feature - t.first)
	if k < 0 || k+1 >= len(t.start) {
		return nil, false
	}
	return t.grams[t.start[k]:t.start[k+1]], true
}

// gramCache remembers the n-gram features of words outside the vocabulary (names, rare
// words, typos, other languages), which mail repeats. One cache serves every vectorizer of
// a Builtin, so a word is looked up once whichever message brings it. It holds at most
// max words (maxCachedWords: about 4 MB) and starts over when full, so it follows what the mail
// talks about now.
type gramCache struct {
	max   int
	mu    sync.RWMutex
	words map[string][]int32 // never changed once stored, so readers keep them after unlocking
}

// maxCachedWords is a Builtin's gramCache's size.
const maxCachedWords = 1 << 15

func newGramCache(max int) *gramCache {
	return &gramCache{max: max, words: make(map[string][]int32)}
}

// get returns the features remembered for word; a nil cache remembers none.
func (c *gramCache) get(word []byte) ([]int32, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.RLock()
	g, ok := c.words[string(word)]
	c.mu.RUnlock()
	return g, ok
}

// put remembers word's features.
func (c *gramCache) put(word []byte, grams []int32) {
	if c == nil {
		return
	}
	g := slices.Clone(grams)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.words) >= c.max {
		c.words = make(map[string][]int32)
	}
	c.words[string(word)] = g
}
