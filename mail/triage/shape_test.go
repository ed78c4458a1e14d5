package triage

import (
	"slices"
	"strings"
	"testing"
)

// shapeFacts are the shape facts of a text's own lines, as the vectorizer finds them.
func shapeFacts(text string) []string {
	var s shapeReader
	var v vectorizer
	var parts partReader
	for _, line := range strings.Split(text, "\n") {
		if parts.next(line) == partOwn {
			s.line(line)
			v.scan(line, func(t []byte, _ bool) { s.word(t) })
		}
	}
	var out []string
	s.facts(func(f string) { out = append(out, f) })
	return out
}

// A pitch that ends on its only question reads differently from a short request, whatever
// its words: the model gets that shape as a fact.
func TestShapeTellsAPitchFromARequest(t *testing.T) {
	pitch := shapeFacts("Hi Ines,\n\nWe help spaces like yours fill desks. Our clients grow fast. We work with 40 of them. " +
		"We'd love to show you how.\n\nWorth a quick chat?\n\nGavin Rourke\nBusiness Development, BrightClean Facilities\n" +
		"https://brightclean.example.com/?ref=mail")
	for _, want := range []string{"h:sent:4+", "h:qshape:one-at-end", "h:voice:we"} {
		if !slices.Contains(pitch, want) {
			t.Errorf("pitch: no %s in %v", want, pitch)
		}
	}
	request := shapeFacts("hey, my fob stopped working this morning. can you reset it? I'm at the door\n\nPriya\n\n> Hi Priya, your fob is ready.")
	for _, want := range []string{"h:sent:2+", "h:qshape:short"} {
		if !slices.Contains(request, want) {
			t.Errorf("request: no %s in %v", want, request)
		}
	}
	mid := shapeFacts("The invoice for March has arrived. Could you check the second line? It looks doubled. " +
		"The rest is fine and we will pay it this week.")
	if !slices.Contains(mid, "h:qshape:inside") {
		t.Errorf("a question inside a longer text: %v", mid)
	}
}
