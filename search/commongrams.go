package search

import (
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
)

// Word pairs ("common grams"): the body is indexed without word positions, so a phrase
// in the body is found as its words and then checked against the stored text. Where the
// words are very common ("of the", "let me know", "the invoice") nearly every message has
// them all, and the check would read most of the inbox. So every adjacent pair of body
// words of which one is a common word is indexed as one more term, and a phrase uses
// these pair terms: its candidates are then almost exactly its matches. Pairs of two
// uncommon words are not indexed; messages holding both such words are few already.

// commonWords are the most frequent English words; a pair with one of them is indexed.
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

// pairTerm is the index term of two adjacent words.
func pairTerm(a, b string) string { return a + " " + b }

// pairAnalyzer emits the pair terms of a text.
type pairAnalyzer struct{}

func (pairAnalyzer) Analyze(input []byte) analysis.TokenStream {
	var out analysis.TokenStream
	prev, prevPos := "", 0
	tokenize(string(input), func(t token) {
		if t.compound {
			return
		}
		if prev != "" && t.pos == prevPos+1 && (commonWords[prev] && commonWords[t.term]) {
			out = append(out, &analysis.Token{Term: []byte(pairTerm(prev, t.term)), Position: len(out) + 1, Type: analysis.AlphaNumeric})
		}
		prev, prevPos = t.term, t.pos
	})
	return out
}

// phraseTerms returns the terms a body phrase needs: the pair term of every adjacent
// pair with a common word, and the words no pair covers.
func phraseTerms(terms []string) (pairs, words []string) {
	covered := make([]bool, len(terms))
	for i := 0; i+1 < len(terms); i++ {
		if commonWords[terms[i]] && commonWords[terms[i+1]] {
			pairs = append(pairs, pairTerm(terms[i], terms[i+1]))
			covered[i], covered[i+1] = true, true
		}
	}
	for i, t := range terms {
		if !covered[i] {
			words = append(words, t)
		}
	}
	return pairs, words
}
