package search

import "strings"

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

// pairHash is the hash of two adjacent words: FNV-1a over "a\x00b", fixed forever because
// the filters are persisted.
func pairHash(a, b string) uint64 {
	h := fnv(fnv(offset64, a)*prime64, b) // *prime64: the 0 separator
	return finish(h)
}

// tripleHash is the hash of three adjacent words whose middle one is common, also put in
// the pair filter: a message can hold "x the" and "the y" without "x the y".
func tripleHash(a, b, c string) uint64 {
	h := fnv(fnv(fnv(offset64, a)*prime64, b)*prime64, c)
	return finish(h ^ 0x5bd1e995)
}

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
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

// newBloom returns the filter of a message's pair hashes.
func newBloom(pairs []uint64) []byte {
	n := (len(pairs)*bloomBitsPerPair + 63) / 64 * 8
	n = min(max(n, 8), bloomMaxBytes)
	f := make([]byte, n)
	m := uint64(n) * 8
	for _, h := range pairs {
		h1, h2 := h&0xffffffff, h>>32|1
		for i := uint64(0); i < bloomHashes; i++ {
			b := (h1 + i*h2) % m
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
	h1, h2 := h&0xffffffff, h>>32|1
	for i := uint64(0); i < bloomHashes; i++ {
		b := (h1 + i*h2) % m
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
