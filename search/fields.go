package search

import (
	"reflect"
	"unsafe"

	index "github.com/blevesearch/bleve_index_api"
)

// The fields of a message's index document are built here directly, without bleve's
// analysis pipeline: each text is tokenized once and its term frequencies are handed to the
// segment builder as they are. What each field holds:
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
	pairs  *field // kindBody: the stored pair filter to fill
}

var fieldSize = int(reflect.TypeFor[field]().Size())

func (f *field) Name() string                                     { return f.name }
func (f *field) ArrayPositions() []uint64                         { return nil }
func (f *field) Options() index.FieldIndexingOptions              { return f.opts }
func (f *field) Value() []byte                                    { return f.value }
func (f *field) NumPlainTextBytes() uint64                        { return uint64(len(f.text) + len(f.value)) }
func (f *field) Size() int                                        { return fieldSize + len(f.value) }
func (f *field) EncodedFieldType() byte                           { return 't' }
func (f *field) AnalyzedLength() int                              { return f.length }
func (f *field) AnalyzedTokenFrequencies() index.TokenFrequencies { return f.freqs }

// Analyze computes the term frequencies (bleve calls it on its analysis workers, in
// parallel across the documents of a batch).
func (f *field) Analyze() {
	switch f.kind {
	case kindKeyword:
		f.length = 1
		f.freqs = index.TokenFrequencies{f.text: &index.TokenFreq{Term: []byte(f.text)}}
	case kindText:
		f.freqs, f.length = textFreqs(f.text)
	case kindBody:
		var pairs []uint64
		f.freqs, f.length, pairs = bodyFreqs(f.text)
		if f.pairs != nil {
			f.pairs.value = newBloom(pairs)
		}
	}
}

// textFreqs returns the terms of text with their positions.
func textFreqs(text string) (index.TokenFrequencies, int) {
	var toks []token
	tokenize(text, func(t token) { toks = append(toks, t) })
	freqs := make(index.TokenFrequencies, len(toks))
	locs := make([]index.TokenLocation, len(toks))
	slab := make([]index.TokenFreq, 0, len(toks))
	for i, t := range toks {
		locs[i].Position = t.pos
		tf := freqs[t.term]
		if tf == nil {
			slab = append(slab, index.TokenFreq{Term: termBytes(t.term)})
			tf = &slab[len(slab)-1]
			freqs[t.term] = tf
		}
		tf.Locations = append(tf.Locations, &locs[i])
		tf.SetFrequency(tf.Frequency() + 1)
	}
	return freqs, len(toks)
}

// bodyFreqs returns the distinct terms of a body, its length in terms, and the hashes of
// its adjacent word pairs.
func bodyFreqs(text string) (index.TokenFrequencies, int, []uint64) {
	freqs := make(index.TokenFrequencies, len(text)/7+8)
	slab := make([]index.TokenFreq, 0, len(text)/7+8)
	pairs := make([]uint64, 0, len(text)/5+4)
	n := 0
	prev, prevPos := "", 0
	prev2, prev2Pos := "", 0
	var buf []byte
	tokenize(text, func(t token) {
		n++
		if _, ok := freqs[t.term]; !ok {
			if len(slab) == cap(slab) {
				slab = make([]index.TokenFreq, 0, 64)
			}
			slab = append(slab, index.TokenFreq{Term: termBytes(t.term)})
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
					slab = append(slab, index.TokenFreq{Term: termBytes(term)})
					freqs[term] = &slab[len(slab)-1]
				}
			}
		}
		prev2, prev2Pos = prev, prevPos
		prev, prevPos = t.term, t.pos
	})
	return freqs, n, pairs
}

// termBytes returns the bytes of a term without copying them: bleve only reads a term.
func termBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
