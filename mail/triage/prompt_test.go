package triage

import (
	"strings"
	"testing"

	"github.com/inboxd/inboxd/db"
)

// The prompt tells the model what every category and urgency level means, so a value added
// to the model in db cannot reach the LLM without a meaning.
func TestLLMPromptExplainsEveryValue(t *testing.T) {
	for _, v := range append(db.TriageCategories(), db.UrgencyLevels()...) {
		if !strings.Contains(systemPrompt, " "+v+": ") {
			t.Errorf("the system prompt does not say what %q means", v)
		}
	}
}
