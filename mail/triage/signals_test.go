package triage

import (
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// isFooterLine answers as a plain search of the lowercased line for each footer word
// would: on every line of the corpus and test sets, and on each word placed at a line's
// start, middle and end, capitalized and cut short.
func TestFooterLinesAreThoseHoldingAFooterWord(t *testing.T) {
	c := qt.New(t)
	var lines []string
	for _, set := range goldenSets(c)[:1] {
		for _, in := range set.inputs {
			lines = append(lines, strings.Split(in.Text, "\n")...)
		}
	}
	for _, w := range footerWords {
		lines = append(lines, w, "x "+w+" y", "The "+strings.ToUpper(w[:1])+w[1:], w[:len(w)-1], w[1:], strings.ToUpper(w))
	}
	var scratch []byte
	footers := 0
	for _, l := range lines {
		t := strings.TrimSpace(l)
		want := false
		for _, w := range footerWords {
			want = want || strings.Contains(string(lowerASCII(t, &scratch)), w)
		}
		c.Assert(isFooterLine(t, &scratch), qt.Equals, want, qt.Commentf("%q", t))
		if want {
			footers++
		}
	}
	c.Assert(footers > 100, qt.IsTrue)
}
