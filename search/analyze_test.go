package search

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	index "github.com/blevesearch/bleve_index_api"
)

// The tokenizer and bodyTerms were rewritten for speed; the first versions are kept here
// as the reference they must agree with, token for token.

// tokenizeWhile is tokenize until emit returns false.
func tokenizeRef(s string, keep func(token) bool) {
	stop := false
	emit := func(t token) {
		if !stop && !keep(t) {
			stop = true
		}
	}
	pos := 0
	// The compound being collected: its byte range in s, first position and word count.
	cStart, cEnd, cPos, cWords := -1, -1, 0, 0
	flush := func() {
		if cWords > 1 && cEnd-cStart <= maxCompoundBytes {
			emitCompound(strings.ToLower(s[cStart:cEnd]), cPos, emit)
		}
		cStart, cWords = -1, 0
	}
	i := 0
	for i < len(s) && !stop {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !isWordRune(r) {
			// A single joiner between two words keeps the compound going.
			if cStart >= 0 && i == cEnd && isJoiner(r) && i+size < len(s) {
				next, _ := utf8.DecodeRuneInString(s[i+size:])
				if isWordRune(next) && !isIdeograph(next) {
					i += size
					continue
				}
			}
			flush()
			i += size
			continue
		}
		if isIdeograph(r) {
			flush()
			pos++
			emit(token{term: string(unicode.ToLower(r)), pos: pos})
			i += size
			continue
		}
		start := i
		runes := 0
		for i < len(s) {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !isWordRune(r) || isIdeograph(r) {
				break
			}
			i += size
			runes++
		}
		pos++
		if runes > maxWordRunes {
			flush()
			continue
		}
		emit(token{term: lowerRef(s[start:i]), pos: pos})
		if cStart >= 0 && start > cEnd { // a joiner was skipped: is it still adjacent?
			if start-cEnd > 4 { // joiners are at most 3 bytes ('’')
				flush()
			}
		}
		if cStart < 0 {
			cStart, cPos = start, pos
		}
		cEnd = i
		cWords++
	}
	flush()
}

func tokenizeRefAll(s string, emit func(token)) {
	tokenizeRef(s, func(t token) bool { emit(t); return true })
}

// bodyFreqsRef returns the distinct terms of a body (with frequency 0: the body field
// keeps none), its length in terms, and the hashes of its adjacent word pairs.
func bodyFreqsRef(text string) (index.TokenFrequencies, int, []uint64) {
	freqs := make(index.TokenFrequencies, len(text)/7+8)
	slab := make([]index.TokenFreq, 0, len(text)/7+8)
	pairs := make([]uint64, 0, len(text)/5+4)
	n := 0
	prev, prevPos := "", 0
	prev2, prev2Pos := "", 0
	var buf []byte
	tokenizeRefAll(text, func(t token) {
		n++
		if _, ok := freqs[t.term]; !ok {
			if len(slab) == cap(slab) {
				slab = make([]index.TokenFreq, 0, 64)
			}
			slab = append(slab, index.TokenFreq{Term: []byte(t.term)})
			freqs[t.term] = &slab[len(slab)-1]
		}
		if t.compound {
			return
		}
		if prev != "" && t.pos == prevPos+1 {
			pairs = append(pairs, pairHash(prev, t.term))
			if prev2 != "" && prev2Pos+1 == prevPos && commonWords[prev] {
				pairs = append(pairs, tripleHash(prev2, prev, t.term))
			}
			if commonWords[prev] && commonWords[t.term] {
				buf = append(append(append(buf[:0], prev...), ' '), t.term...)
				if _, ok := freqs[string(buf)]; !ok {
					if len(slab) == cap(slab) {
						slab = make([]index.TokenFreq, 0, 64)
					}
					term := string(buf)
					slab = append(slab, index.TokenFreq{Term: []byte(term)})
					freqs[term] = &slab[len(slab)-1]
				}
			}
		}
		prev2, prev2Pos = prev, prevPos
		prev, prevPos = t.term, t.pos
	})
	return freqs, n, pairs
}

// randomText makes text rich in the tokenizer's edge cases: joiners, case, non-ASCII
// letters and marks, ideographs, long runs, common words.
func randomText(rng *rand.Rand) string {
	parts := []string{"the", "of", "and", "to", "a", "In", "YOU", "let", "me", "know", "alice", "Example", "com",
		"v1", "2", "x", "café", "naïve", "東京", "ｶﾀｶﾅ", "ÄÖÜ", "ﬁ", "İstanbul", "e\u0301", "٣", "follow", "up",
		strings.Repeat("z", 64), strings.Repeat("y", 65), strings.Repeat("é", 70), "mail", "org", "co", "uk"}
	seps := []string{" ", " ", " ", "  ", "\n", ".", "@", "-", "_", "+", "'", "’", "..", ". ", "-@", "/", ",", "!",
		"\u00a0", "—", "\xff", "\u200b", ""}
	var b strings.Builder
	n := rng.IntN(40)
	for i := 0; i < n; i++ {
		b.WriteString(parts[rng.IntN(len(parts))])
		b.WriteString(seps[rng.IntN(len(seps))])
	}
	return b.String()
}

func collect(s string, tok func(string, func(token) bool)) []token {
	var out []token
	tok(s, func(t token) bool { out = append(out, t); return true })
	return out
}

func TestTokenizerMatchesReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"", "a", "Alice@Example.COM", "mail.example.co.uk", "x.", ".x", "a..b", "a.-b", "o'brien’s",
		"a\xffb", "東京タワー", "v1.2.3-rc1+build", strings.Repeat("ab.", 200)}
	for i := 0; i < 20000; i++ {
		texts = append(texts, randomText(rng))
	}
	for _, s := range texts {
		got, want := collect(s, tokenizeWhile), collect(s, tokenizeRef)
		if !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", s, got, want)
		}
		// Stopping early stops at the same token.
		if len(want) > 1 {
			k := rng.IntN(len(want))
			var got []token
			tokenizeWhile(s, func(t token) bool { got = append(got, t); return len(got) <= k })
			if !slices.Equal(got, want[:k+1]) {
				t.Fatalf("%q: stopped at %v, want %v", s, got, want[:k+1])
			}
		}
		checkBodyFreqs(t, s)
	}
}

func checkBodyFreqs(t *testing.T, s string) {
	t.Helper()
	an := newAnalysis()
	sc := an.scratch.Get().(*bodyScratch)
	terms, n, pairs := an.bodyTerms(s, sc)
	wantFreqs, wantN, wantPairs := bodyFreqsRef(s)
	if n != wantN {
		t.Fatalf("%q: length %d, want %d", s, n, wantN)
	}
	if len(terms) != len(wantFreqs) {
		t.Fatalf("%q: %d terms, want %d", s, len(terms), len(wantFreqs))
	}
	seen := map[string]bool{}
	for _, term := range terms {
		if seen[term] || wantFreqs[term] == nil {
			t.Fatalf("%q: term %q repeated or not in the reference", s, term)
		}
		seen[term] = true
	}
	// The filter is built from the pairs as a multiset: same hashes, same count.
	got, want := slices.Clone(pairs), slices.Clone(wantPairs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%q: pair hashes differ", s)
	}
}

func lowerRef(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return strings.ToLower(s)
		}
	}
	return s
}

// A body or keyword field hands bleve each distinct term once, with neither frequencies
// nor locations (they are indexed SkipFreqNorm), and its terms' bytes are the terms.
func TestBareFieldsHoldEachTermOnce(t *testing.T) {
	body := &field{name: "body", kind: kindBody, an: newAnalysis(), text: "The invoice is attached; the invoice total is due."}
	body.Analyze()
	key := &field{name: "inbox", kind: kindKeyword, text: "sales@inboxd.test"}
	key.Analyze()
	for _, f := range []*field{body, key} {
		freqs := f.AnalyzedTokenFrequencies()
		if len(freqs) != len(f.terms) {
			t.Fatalf("%s: %d terms in the map, %d in the field", f.name, len(freqs), len(f.terms))
		}
		if len(freqs) == 0 {
			t.Fatalf("%s: no terms", f.name)
		}
		for term, tf := range freqs {
			if string(tf.Term) != term || tf.Frequency() != 0 || len(tf.Locations) != 0 {
				t.Fatalf("%s: term %q is %v", f.name, term, tf)
			}
		}
	}
	if body.freqs["invoice"] == nil || body.freqs["the"] == nil || len(key.freqs) != 1 || key.freqs["sales@inboxd.test"] == nil {
		t.Fatalf("terms %v and %v", body.freqs, key.freqs)
	}
}
