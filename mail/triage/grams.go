package triage

import (
	"hash/maphash"
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
// words, typos, other languages), which mail repeats with a long tail. One cache serves
// every vectorizer of a Builtin, so a word is looked up once whichever message brings it.
//
// It is split in shards by the word's hash, each with its own lock, because every word of
// every message being received asks it and a single lock's counter is fought over by all
// cores. Each shard keeps two generations: when the current one is full it becomes the old
// one and the one before is dropped, and a word found in the old one moves to the current
// one. So the words mail keeps using stay (a cache that started over when full recomputed
// them all each time the long tail filled it), and memory stays bounded: at most twice max
// words (maxCachedWords: about 8 MB in all). A word is known by its 64-bit hash, not its
// text: two words of mail share one about once in 2^64 pairs, and a map of numbers hashes
// and compares in a few instructions where a map of strings reads the text again.
type gramCache struct {
	seed   maphash.Seed
	shards []gramShard
}

type gramShard struct {
	mu       sync.RWMutex
	max      int                // words per generation
	cur, old map[uint64][]int32 // never changed once stored, so readers keep them after unlocking
	_        [64]byte           // a shard's lock on a cache line of its own
}

// maxCachedWords is a Builtin's gramCache's size per generation.
const maxCachedWords = 1 << 15

// gramShards is the number of shards (the top four bits of a hash): enough that cores
// rarely meet on one lock.
const gramShards = 16

func newGramCache(words int) *gramCache {
	c := &gramCache{seed: maphash.MakeSeed(), shards: make([]gramShard, gramShards)}
	for i := range c.shards {
		c.shards[i] = gramShard{max: max(1, words/gramShards), cur: map[uint64][]int32{}}
	}
	return c
}

// key returns word's hash and the shard that holds it.
func (c *gramCache) key(word []byte) (uint64, *gramShard) {
	h := maphash.Bytes(c.seed, word)
	return h, &c.shards[h>>60] // the top bits: the maps use the low ones
}

// get returns the features remembered for word; a nil cache remembers none.
func (c *gramCache) get(word []byte) ([]int32, bool) {
	if c == nil {
		return nil, false
	}
	h, s := c.key(word)
	s.mu.RLock()
	g, ok := s.cur[h]
	if !ok {
		g, ok = s.old[h]
		s.mu.RUnlock()
		if ok {
			s.store(h, g)
		}
		return g, ok
	}
	s.mu.RUnlock()
	return g, ok
}

// put remembers word's features.
func (c *gramCache) put(word []byte, grams []int32) {
	if c == nil {
		return
	}
	h, s := c.key(word)
	s.store(h, slices.Clone(grams))
}

// store puts a word's features in the current generation, starting a new one when it is
// full.
func (s *gramShard) store(h uint64, g []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.max {
		s.old, s.cur = s.cur, make(map[uint64][]int32, s.max)
	}
	s.cur[h] = g
}
