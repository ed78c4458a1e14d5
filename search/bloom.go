package search

import (
	"hash/maphash"
	"sort"
	"strings"
)

// The body is indexed without word positions: positions in bleve's segments cost about
// five bytes per word, as much as the text itself. A phrase in the body is found instead
// as the messages holding all its words, then narrowed by each message's pair filter: a
// Bloom filter of the hashes of its adjacent word pairs ("red apple" -> one hash), stored
// with the message's index document (one byte per entry). A phrase whose pairs are not all
// in a message's filter is certainly not in it; one whose pairs are is almost certainly
// there, and the few messages a page returns are checked against the stored text
// (Indexer.Search), so a false positive (about 2.2% per entry) never reaches a client.

// Pairs of two very common words ("of the", "let me") are also indexed as terms of the body
// ("common grams"): a phrase of such words ("let me know") is in nearly every message's
// words and in many messages' pair filters, and these terms narrow it to the messages that
// really hold it. Pairs with a rarer word are not indexed: the rarer word's postings are
// short enough for the pair filters to check.
var commonWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the of and to a in is you that it for on was with as have be at this are not but
from or by your we can will an all if about my one would there their what so up out which me when make like time
no just him know take people into year good some could them see other than then now look only come its over think
also back after use two how our work first well way even new want because any these give day most us i he she they
do does did has had been were am re hi hello thanks thank please let get got here more may should need`) {
		m[w] = true
	}
	return m
}()

// commonList is commonWords in order, and commonIdx the index of each word in it.
var commonList, commonIdx = func() ([]string, map[string]int16) {
	var l []string
	for w := range commonWords {
		l = append(l, w)
	}
	sort.Strings(l)
	m := make(map[string]int16, len(l))
	for i, w := range l {
		m[w] = int16(i)
	}
	return l, m
}()

// commonIndex is the index of a common word in commonList, or -1.
func commonIndex(w string) int16 {
	if i, ok := commonIdx[w]; ok {
		return i
	}
	return -1
}

// commonPairTerm is a pair term with its hash in bodyTerms' table.
type commonPairTerm struct {
	term string
	hash uint64
}

// commonPair returns the pair term of two common words by their indexes in commonList.
// The terms made so far are kept, so that indexing does not make the same strings for
// every message.
func (an *docAnalysis) commonPair(a, b int16) *commonPairTerm {
	slot := &an.pairs[int(a)*len(commonList)+int(b)]
	if p := slot.Load(); p != nil {
		return p
	}
	t := pairTerm(commonList[a], commonList[b])
	p := &commonPairTerm{term: t, hash: maphash.String(an.seed, t)}
	slot.Store(p)
	return p
}

// pairTerm is the index term of two adjacent common words.
func pairTerm(a, b string) string { return a + " " + b }

// phrasePairs returns the pair terms of a phrase's adjacent common words.
func phrasePairs(terms []string) []string {
	var out []string
	for i := 0; i+1 < len(terms); i++ {
		if commonWords[terms[i]] && commonWords[terms[i+1]] {
			out = append(out, pairTerm(terms[i], terms[i+1]))
		}
	}
	return out
}

const (
	bloomBitsPerPair = 8
	bloomHashes      = 5
	bloomMaxBytes    = 8 << 10 // a body at the 128 KB cap fills its filter more, no more
)

// The hashes are fixed forever (within a Version) because the filters are persisted. A
// word is hashed once (termHash, FNV-1a), and a pair or triple from its words' hashes, so
// that indexing hashes each distinct word of a message once rather than in every pair.

// termHash is the hash of one word.
func termHash(s string) uint64 { return fnv(offset64, s) }

// pairHash is the hash of two adjacent words.
func pairHash(a, b string) uint64 { return pairOf(termHash(a), termHash(b)) }

func pairOf(a, b uint64) uint64 { return finish(a*golden ^ b) }

// tripleHash is the hash of three adjacent words whose middle one is common, also put in
// the pair filter: a message can hold "x the" and "the y" without "x the y".
func tripleHash(a, b, c string) uint64 { return tripleOf(termHash(a), termHash(b), termHash(c)) }

func tripleOf(a, b, c uint64) uint64 { return finish((a*golden^b)*golden ^ c ^ 0x5bd1e995) }

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
	golden   = 0x9e3779b97f4a7c15
)

func fnv(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime64
	}
	return h
}

// finish mixes the bits: FNV's low bits mix poorly for short inputs.
func finish(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// bloomBit is the i-th bit of hash h in a filter of m bits: double hashing, reduced to
// [0, m) by a multiply and shift rather than a division.
func bloomBit(h uint64, i uint32, m uint64) uint64 {
	x := uint32(h) + i*(uint32(h>>32)|1)
	return uint64(x) * m >> 32
}

// newBloom returns the filter of a message's pair hashes.
func newBloom(pairs []uint64) []byte {
	n := (len(pairs)*bloomBitsPerPair + 63) / 64 * 8
	n = min(max(n, 8), bloomMaxBytes)
	f := make([]byte, n)
	m := uint64(n) * 8
	for _, h := range pairs {
		for i := uint32(0); i < bloomHashes; i++ {
			b := bloomBit(h, i, m)
			f[b>>3] |= 1 << (b & 7)
		}
	}
	return f
}

// bloomHas reports whether the filter may hold the pair hash h.
func bloomHas(f []byte, h uint64) bool {
	if len(f) == 0 {
		return false
	}
	m := uint64(len(f)) * 8
	for i := uint32(0); i < bloomHashes; i++ {
		b := bloomBit(h, i, m)
		if f[b>>3]&(1<<(b&7)) == 0 {
			return false
		}
	}
	return true
}

// phraseHashes returns what the pair filter of a message holding the phrase has: the hash
// of every adjacent pair and of every three adjacent words with a common one in the middle.
func phraseHashes(terms []string) []uint64 {
	out := make([]uint64, 0, 2*len(terms))
	for i := 0; i+1 < len(terms); i++ {
		out = append(out, pairHash(terms[i], terms[i+1]))
		if i+2 < len(terms) && commonWords[terms[i+1]] {
			out = append(out, tripleHash(terms[i], terms[i+1], terms[i+2]))
		}
	}
	return out
}

// bloomAll reports whether a message whose filter is f may hold all the pair hashes.
func bloomAll(f []byte, hashes []uint64) bool {
	for _, h := range hashes {
		if !bloomHas(f, h) {
			return false
		}
	}
	return true
}
