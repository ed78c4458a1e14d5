package triage

import (
	"slices"
	"testing"
	"time"
)

// intentFacts are the intent facts of a message, as the vectorizer finds them.
func intentFacts(from, to, text string) []string {
	var facts []string
	v := newVectorizer(func(key []byte) (int32, bool) {
		if k := string(key); len(k) > 5 && (k[:5] == "h:int" || k[:5] == "h:qen") {
			facts = append(facts, k)
		}
		return 0, true
	})
	var out sparse
	v.vector(NewInput(from, []string{to}, nil, "Hello", time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), text), &out)
	return facts
}

// A request from outside to a team's address and a pitch to a person ask in different
// phrases, whatever they are about: the model gets the family of each, who wrote to
// whom, and the family the closing question is in.
func TestIntentTellsARequestFromAPitch(t *testing.T) {
	request := intentFacts("Dana Okafor <dana@riverside-radio.org>", "hello@cowork.example",
		"Hi there,\n\nWe're making a programme about local workspaces. Would you be able to host us for an hour next week?\n\nDana")
	for _, want := range []string{"h:int:ask", "h:int:ask:person>role", "h:int:ask>role", "h:qend:ask"} {
		if !slices.Contains(request, want) {
			t.Errorf("request: no %s in %v", want, request)
		}
	}
	pitch := intentFacts("Gavin Rourke <gavin@brightclean.example>", "ines@cowork.example",
		"Hi Ines,\n\nWe help spaces like yours fill desks; our clients grow fast.\nWould you be open to a quick call on Thursday?\n\nGavin")
	for _, want := range []string{"h:int:pitch", "h:int:offer", "h:int:offer:person>person", "h:qend:offer"} {
		if !slices.Contains(pitch, want) {
			t.Errorf("pitch: no %s in %v", want, pitch)
		}
	}
	if slices.Contains(pitch, "h:int:ask") {
		t.Errorf("pitch: \"would you be open\" read as a request: %v", pitch)
	}
	note := intentFacts("ann@example.com", "bob@example.com", "Thanks, that worked.")
	if len(note) != 0 {
		t.Errorf("a thank-you: %v", note)
	}
}
