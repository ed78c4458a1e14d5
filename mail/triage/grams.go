package triage

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
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
// word's feature ("w:" and the word), built once with the model (Model.refWordGrams).
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

// gramCache remembers the n-gram features of words outside the vocabulary (names, rare
// words, typos, other languages), which mail repeats with a long tail. One cache serves
// every vectorizer of a Builtin, so a word is looked up once whichever message brings it.
//
// Every word of every message being received asks it, from every core at once, so reading
// it writes nothing shared: it is a table of slots, each an atomic pointer to an entry that
// never changes once stored, and a reader loads a pointer and compares a hash. (Sharded
// read-write locks, one per sixteenth of the words, cost a contended atomic add per word
// on each lock and unlock: the locks' counters moved between the cores, and with the maps'
// lookups they were a fifth of the model's time on two cores, BENCHMARKS.md.) A word may
// sit in either of the two slots of its pair; a new word takes the empty one, or else
// replaces one of the two chosen by its hash, so a word the mail keeps using is mostly
// found and memory stays bounded (about 9 MB at maxCachedWords). A word is known by its
// 64-bit hash, not its text: two words of mail share one about once in 2^64 pairs, and
// comparing a number costs nothing where comparing the text reads it again.
type gramCache struct {
	seed  maphash.Seed
	slots []gramSlot // a power of two of them
}

// gramSlot holds a word's entry, and beside it the word's hash, written before the entry,
// so that a reader follows the pointer of the slot that holds its word alone. A reader
// that sees a hash and the entry of two writers apart finds the entry's own hash is not
// the word's, and reads on as for a word the cache does not have.
type gramSlot struct {
	hash  atomic.Uint64
	entry atomic.Pointer[gramEntry]
}

// gramEntry is a word's hash and its n-gram features, in the entry itself when they fit
// (most words': one allocation of two cache lines, read at once, instead of an entry and an
// array apart, two more reads that missed the cache in the server).
type gramEntry struct {
	hash   uint64
	grams  []int32 // inline[:n], or an array of their own when more
	inline [gramsInline]int32
}

// gramsInline is how many features fit in a gramEntry of 128 bytes.
const gramsInline = 24

// maxCachedWords is a Builtin's gramCache's size in words.
const maxCachedWords = 1 << 16

// newGramCache returns a cache of at least words slots (two at the least).
func newGramCache(words int) *gramCache {
	n := 2
	for n < words {
		n *= 2
	}
	return &gramCache{seed: maphash.MakeSeed(), slots: make([]gramSlot, n)}
}

// pair returns word's hash and the first of its two slots.
func (c *gramCache) pair(word []byte) (uint64, int) {
	h := maphash.Bytes(c.seed, word)
	return h, int(h>>32) & (len(c.slots) - 2) // the high bits: the low one picks a replacement
}

// get returns the features remembered for word; a nil cache remembers none.
func (c *gramCache) get(word []byte) ([]int32, bool) {
	if c == nil {
		return nil, false
	}
	h, i := c.pair(word)
	for k := i; k < i+2; k++ {
		s := &c.slots[k]
		if s.hash.Load() != h {
			continue
		}
		if e := s.entry.Load(); e != nil && e.hash == h {
			return e.grams, true
		}
	}
	return nil, false
}

// put remembers word's features.
func (c *gramCache) put(word []byte, grams []int32) {
	if c == nil {
		return
	}
	h, i := c.pair(word)
	e := &gramEntry{hash: h}
	if len(grams) <= gramsInline {
		e.grams = e.inline[:copy(e.inline[:], grams)]
	} else {
		e.grams = slices.Clone(grams)
	}
	switch {
	case c.slots[i].entry.Load() == nil:
	case c.slots[i+1].entry.Load() == nil:
		i++
	default:
		i += int(h & 1)
	}
	c.slots[i].hash.Store(h)
	c.slots[i].entry.Store(e)
}
