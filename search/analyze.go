package search

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
)

// The analyzer is Postgres' "simple" configuration with one addition for mail: words are
// lowercased runs of letters and digits, with no stemming and no stop words; and where
// words are joined by '.', '@', '-', '_', '+' or an apostrophe without spaces
// ("alice@example.com", "follow-up", "v1.2"), the whole compound is indexed too, at the
// position of its first word. An address also yields its domain and the domain's parent
// domains ("mail.example.com", "example.com"), so a search for a sender's domain finds
// the sender. Han, Hiragana and Katakana characters are one word each.

// AnalyzerName is the name of the analyzer in bleve's registry and in the mapping.
const AnalyzerName = "inboxd"

const (
	maxWordRunes     = 64  // longer runs (base64, hashes) are skipped, not indexed
	maxCompoundBytes = 254 // an email address is at most 254 octets
)

func init() {
	registry.RegisterAnalyzer(AnalyzerName, func(map[string]interface{}, *registry.Cache) (analysis.Analyzer, error) {
		return analyzer{}, nil
	})
}

// analyzer implements analysis.Analyzer with tokenize, for the mapping (the index's own
// documents are analyzed by fields.go).
type analyzer struct{}

func (analyzer) Analyze(input []byte) analysis.TokenStream {
	// Few allocations for all tokens and terms: indexing speed is mostly allocation and
	// garbage collection.
	slab := make([]analysis.Token, 0, len(input)/5+4)
	buf := make([]byte, 0, len(input)+len(input)/4)
	tokenize(string(input), func(t token) {
		start := len(buf)
		buf = append(buf, t.term...)
		slab = append(slab, analysis.Token{Term: buf[start:len(buf):len(buf)], Position: t.pos, Type: analysis.AlphaNumeric})
	})
	out := make(analysis.TokenStream, len(slab))
	for i := range slab {
		out[i] = &slab[i]
	}
	return out
}

// token is one term of a text with its 1-based word position. compound is set for the
// joined forms ("alice@example.com"), which share the position of their first word.
type token struct {
	term     string
	pos      int
	compound bool
}

// asciiWord marks the ASCII letters and digits; most mail is ASCII, and the table keeps
// tokenizing cheap.
var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	return t
}()

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiWord[r]
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

func isIdeograph(r rune) bool {
	if r < 0x2E80 {
		return false
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) || unicode.Is(unicode.Katakana, r)
}

func isJoiner(r rune) bool {
	switch r {
	case '.', '@', '-', '_', '+', '\'', '’':
		return true
	}
	return false
}

// tokenize calls emit for every term of s in position order.
func tokenize(s string, emit func(token)) {
	tokenizeWhile(s, func(t token) bool { emit(t); return true })
}

// tokenizeWhile is tokenize until emit returns false. Most mail is ASCII: an ASCII byte is
// classified by a table and a word of lowercase ASCII is a substring of s, not a copy.
func tokenizeWhile(s string, keep func(token) bool) {
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
		if c := s[i]; c < utf8.RuneSelf {
			if !asciiWord[c] {
				// A single joiner between two words keeps the compound going.
				if cStart >= 0 && i == cEnd && asciiJoiner[c] && i+1 < len(s) && wordStartsAt(s, i+1) {
					i++
					continue
				}
				flush()
				i++
				continue
			}
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !isWordRune(r) {
				if cStart >= 0 && i == cEnd && isJoiner(r) && i+size < len(s) && wordStartsAt(s, i+size) {
					i += size
					continue
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
		}
		start := i
		runes := 0
		plain := true // lowercase ASCII only
		for i < len(s) {
			c := s[i]
			if c < utf8.RuneSelf {
				if !asciiWord[c] {
					break
				}
				if 'A' <= c && c <= 'Z' {
					plain = false
				}
				i++
				runes++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if !isWordRune(r) || isIdeograph(r) {
				break
			}
			plain = false
			i += size
			runes++
		}
		pos++
		if runes > maxWordRunes {
			flush()
			continue
		}
		term := s[start:i]
		if !plain {
			term = strings.ToLower(term)
		}
		emit(token{term: term, pos: pos})
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

// asciiJoiner marks the ASCII joiners (isJoiner).
var asciiJoiner = func() (t [utf8.RuneSelf]bool) {
	for _, c := range ".@-_+'" {
		t[c] = true
	}
	return t
}()

// wordStartsAt reports whether a word that can join a compound (not an ideograph) starts
// at s[i].
func wordStartsAt(s string, i int) bool {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiWord[c]
	}
	r, _ := utf8.DecodeRuneInString(s[i:])
	return isWordRune(r) && !isIdeograph(r)
}

// emitCompound emits a joined form and, for an address or a host name, its domains.
func emitCompound(c string, pos int, emit func(token)) {
	c = strings.Trim(c, ".@-_+'’")
	if c == "" {
		return
	}
	emit(token{term: c, pos: pos, compound: true})
	host := c
	if at := strings.LastIndexByte(c, '@'); at >= 0 {
		host = c[at+1:]
		if host != "" && strings.Contains(host, ".") {
			emit(token{term: host, pos: pos + 1, compound: true})
		} else {
			return
		}
	}
	// Parent domains of a host name with an alphabetic top-level label: mail.example.com
	// also yields example.com (not com).
	labels := strings.Split(host, ".")
	if len(labels) < 3 || !alpha(labels[len(labels)-1]) {
		return
	}
	for j := 1; j+2 <= len(labels) && j <= 4; j++ {
		emit(token{term: strings.Join(labels[j:], "."), pos: pos + 1, compound: true})
	}
}

func alpha(s string) bool {
	if len(s) < 2 {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// Terms returns the terms of a query word as the index holds them: one term when the word
// is a single word or a compound ("alice@example.com"), else the words in order (a word
// like "foo/bar" or "東京" matches as a phrase).
func Terms(word string) []string {
	var words []string
	var whole string
	tokenize(word, func(t token) {
		if t.compound {
			if whole == "" {
				whole = t.term
			}
			return
		}
		words = append(words, t.term)
	})
	if whole != "" && len(words) > 0 && covers(word, whole) {
		return []string{whole}
	}
	return words
}

// covers reports whether the compound is the whole word, up to case and edge punctuation.
func covers(word, compound string) bool {
	w := strings.ToLower(strings.TrimFunc(word, func(r rune) bool { return !isWordRune(r) }))
	return w == compound
}
