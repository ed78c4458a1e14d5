package search

import (
	"hash/maphash"
	"reflect"
	"sync"
	"sync/atomic"

	index "github.com/blevesearch/bleve_index_api"
)

// The fields of a message's index document are built here directly, without bleve's
// analysis pipeline: each text is tokenized once and its term frequencies are handed to
// bleve as they are. What each field holds:
//
//   - subject, from, to: every term with its word positions (phrases in these fields are
//     matched in the index exactly) and frequencies;
//   - body: every term, once per message, with no frequencies, norms or positions (a body
//     term is a bitmap posting, the cheapest there is), and the pairs of adjacent common
//     words (bloom.go);
//   - body pairs (a stored field, not indexed): a small Bloom filter of the message's
//     adjacent word pairs, read only to check a body phrase (see bloom.go);
//   - the keywords (inbox, triage filters, attachment, day): one term each, bitmap only.

// Indexing options of each kind of field.
const (
	optText    = index.IndexField | index.IncludeTermVectors
	optBody    = index.IndexField | index.SkipFreqNorm
	optKeyword = index.IndexField | index.SkipFreqNorm
	optStored  = index.StoreField
)

type fieldKind uint8

const (
	kindText    fieldKind = iota // positions and frequencies
	kindBody                     // terms only; fills the pair filter
	kindKeyword                  // the whole value is one term
	kindStored                   // stored bytes, not indexed
)

// field implements bleve's document field with analysis done by this package.
type field struct {
	name  string
	kind  fieldKind
	opts  index.FieldIndexingOptions
	text  string // what is indexed
	value []byte // what is stored (kindStored)

	length int
	freqs  index.TokenFrequencies
	terms  []string     // kindBody, kindKeyword: the distinct terms (freqs made on demand)
	pairs  *field       // kindBody: the stored pair filter to fill
	an     *docAnalysis // kindBody: the index's
}

// fieldSize is what a field takes, for bleve's estimate of a batch's memory (reflect on our
// own type only).
var fieldSize = int(reflect.TypeFor[field]().Size())

func (f *field) Name() string                        { return f.name }
func (f *field) ArrayPositions() []uint64            { return nil }
func (f *field) Options() index.FieldIndexingOptions { return f.opts }
func (f *field) Value() []byte                       { return f.value }
func (f *field) NumPlainTextBytes() uint64           { return uint64(len(f.text) + len(f.value)) }
func (f *field) Size() int                           { return fieldSize + len(f.value) }
func (f *field) EncodedFieldType() byte              { return 't' }
func (f *field) AnalyzedLength() int                 { return f.length }

// AnalyzedTokenFrequencies returns the terms with their frequencies. Our segment builder
// reads the terms of body and keyword fields from f.terms instead (they carry neither
// frequencies nor locations), so their map is only made if zapx builds the segment: for a
// 2 KB body it was ~26 KB of garbage and a map insert per distinct term.
func (f *field) AnalyzedTokenFrequencies() index.TokenFrequencies {
	if f.freqs == nil && f.terms != nil {
		f.freqs = bareFreqs(f.terms)
	}
	return f.freqs
}

// Analyze computes the term frequencies (bleve calls it on its analysis workers, in
// parallel across the documents of a batch).
func (f *field) Analyze() {
	switch f.kind {
	case kindKeyword:
		f.terms, f.length = []string{f.text}, 1
	case kindText:
		f.freqs, f.length = textFreqs(f.text)
	case kindBody:
		sc := f.an.scratch.Get().(*bodyScratch)
		var pairs []uint64
		f.terms, f.length, pairs = f.an.bodyTerms(f.text, sc)
		if f.pairs != nil {
			f.pairs.value = newBloom(pairs)
		}
		sc.reset()
		f.an.scratch.Put(sc)
	}
}

// bareFreqs returns the frequencies of terms indexed without frequencies or positions
// (body and keyword fields: SkipFreqNorm), each term once. The terms' bytes share one
// allocation, and so do their entries: for a 2 KB body a term apiece was most of the
// garbage of its analysis.
func bareFreqs(terms []string) index.TokenFrequencies {
	size := 0
	for _, t := range terms {
		size += len(t)
	}
	buf := make([]byte, 0, size)
	slab := make([]index.TokenFreq, len(terms))
	freqs := make(index.TokenFrequencies, len(terms))
	for i, t := range terms {
		buf = append(buf, t...)
		slab[i].Term = buf[len(buf)-len(t) : len(buf) : len(buf)]
		freqs[t] = &slab[i]
	}
	return freqs
}

// textFreqs returns the terms of text with their positions.
func textFreqs(text string) (index.TokenFrequencies, int) {
	var toks []token
	tokenize(text, func(t token) { toks = append(toks, t) })
	freqs := make(index.TokenFrequencies, len(toks))
	locs := make([]index.TokenLocation, len(toks))
	slab := make([]index.TokenFreq, 0, len(toks))
	buf := make([]byte, 0, len(text))
	for i, t := range toks {
		locs[i].Position = t.pos
		tf := freqs[t.term]
		if tf == nil {
			buf = append(buf, t.term...)
			slab = append(slab, index.TokenFreq{Term: buf[len(buf)-len(t.term) : len(buf) : len(buf)]})
			tf = &slab[len(slab)-1]
			freqs[t.term] = tf
		}
		tf.Locations = append(tf.Locations, &locs[i])
		tf.SetFrequency(tf.Frequency() + 1)
	}
	return freqs, len(toks)
}

// bodyScratch is the working memory of bodyTerms, reused across messages.
type bodyScratch struct {
	slots []int32    // open addressing over terms: index+1, 0 is empty
	terms []bodyTerm // the distinct terms in order of appearance
	pairs []uint64
}

type bodyTerm struct {
	term   string
	hash   uint64 // in the table (maphash)
	fixed  uint64 // termHash, for the pair filter
	common int16  // index in commonList, or -1
}

// docAnalysis is what the analysis of an index's documents shares across messages.
type docAnalysis struct {
	seed    maphash.Seed // of the terms' hashes in bodyScratch's table
	scratch sync.Pool    // of *bodyScratch
	pairs   []atomic.Pointer[commonPairTerm]
}

func newAnalysis() *docAnalysis {
	an := &docAnalysis{seed: maphash.MakeSeed(), pairs: make([]atomic.Pointer[commonPairTerm], len(commonList)*len(commonList))}
	an.scratch.New = func() any { return &bodyScratch{slots: make([]int32, 1024)} }
	return an
}

// add returns the index of term among the distinct terms, adding it if new.
func (sc *bodyScratch) add(term string, h uint64, common int16) int {
	mask := uint64(len(sc.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		k := sc.slots[j]
		if k == 0 {
			break
		}
		if t := &sc.terms[k-1]; t.hash == h && t.term == term {
			return int(k - 1)
		}
	}
	var fixed uint64
	if common == -2 { // a word, not a pair term
		common, fixed = commonIndex(term), termHash(term)
	}
	sc.terms = append(sc.terms, bodyTerm{term: term, hash: h, fixed: fixed, common: common})
	if 2*len(sc.terms) > len(sc.slots) {
		sc.slots = make([]int32, 2*len(sc.slots))
		mask = uint64(len(sc.slots) - 1)
		for i, t := range sc.terms {
			j := t.hash & mask
			for sc.slots[j] != 0 {
				j = (j + 1) & mask
			}
			sc.slots[j] = int32(i + 1)
		}
		return len(sc.terms) - 1
	}
	j := h & mask
	for sc.slots[j] != 0 {
		j = (j + 1) & mask
	}
	sc.slots[j] = int32(len(sc.terms))
	return len(sc.terms) - 1
}

func (sc *bodyScratch) reset() {
	clear(sc.slots)
	clear(sc.terms) // no references to the text kept in the pool
	sc.terms = sc.terms[:0]
	sc.pairs = sc.pairs[:0]
}

// bodyTerms returns the distinct terms of a body, its length in terms, and the hashes of
// its adjacent word pairs (in sc.pairs, valid until sc is reset). Each word is looked up
// once in a table of the message's own terms; the common-word pair terms are shared
// strings (commonPair).
func (an *docAnalysis) bodyTerms(text string, sc *bodyScratch) ([]string, int, []uint64) {
	n := 0
	// The previous two words: position (0 for none), fixed hash, common index.
	prevPos, prevHash, prevCommon := 0, uint64(0), int16(-1)
	prev2Pos, prev2Hash := 0, uint64(0)
	tokenize(text, func(t token) {
		n++
		k := sc.add(t.term, maphash.String(an.seed, t.term), -2)
		if t.compound {
			return
		}
		h, common := sc.terms[k].fixed, sc.terms[k].common
		if prevPos != 0 && t.pos == prevPos+1 {
			sc.pairs = append(sc.pairs, pairOf(prevHash, h))
			if prev2Pos != 0 && prev2Pos+1 == prevPos && prevCommon >= 0 {
				sc.pairs = append(sc.pairs, tripleOf(prev2Hash, prevHash, h))
			}
			if prevCommon >= 0 && common >= 0 {
				p := an.commonPair(prevCommon, common)
				sc.add(p.term, p.hash, -1)
			}
		}
		prev2Pos, prev2Hash = prevPos, prevHash
		prevPos, prevHash, prevCommon = t.pos, h, common
	})
	terms := make([]string, len(sc.terms))
	for i, t := range sc.terms {
		terms[i] = t.term
	}
	return terms, n, sc.pairs
}
