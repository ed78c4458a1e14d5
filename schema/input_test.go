package schema

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// Labels are shown in lists, logs and terminals, where a control character can break a
// line, forge a log entry or drive the terminal. Every request that carries a label
// refuses one, naming the label.
func TestLabelControlCharacters(t *testing.T) {
	v := validator(t)
	controls := []rune{0x00, 0x01, '\t', '\n', '\r', 0x1b, 0x1f, 0x7f, 0x80, 0x85, 0x9b, 0x9f}
	for _, r := range controls {
		label := "a" + string(r) + "b"
		pair := []string{"ok", label}
		bodies := []struct{ op, body, field string }{
			{"send", obj(sendBase, map[string]any{"labels": pair}), "labels[1]"},
			{"reply", obj(replyBase, map[string]any{"labels": pair}), "labels[1]"},
			{"updateMessageLabels", obj(nil, map[string]any{"addLabels": pair}), "addLabels[1]"},
			{"updateMessageLabels", obj(nil, map[string]any{"removeLabels": pair}), "removeLabels[1]"},
			{"updateThreadLabels", obj(nil, map[string]any{"addLabels": pair}), "addLabels[1]"},
			{"updateThreadLabels", obj(nil, map[string]any{"removeLabels": pair}), "removeLabels[1]"},
		}
		for _, b := range bodies {
			t.Run(fmt.Sprintf("%s/%s/%U", b.op, b.field, r), func(t *testing.T) {
				assertOutcome(qt.New(t), v.Body(b.op, []byte(b.body)), bad(b.field))
			})
		}
		for _, op := range []string{"listMessages", "listThreads"} {
			t.Run(fmt.Sprintf("%s/labels/%U", op, r), func(t *testing.T) {
				_, err := v.Query(op, url.Values{"labels": pair})
				if r == 0 { // NUL is refused in every query parameter, before the schema
					assertOutcome(qt.New(t), err, bad("labels"))
					return
				}
				assertOutcome(qt.New(t), err, bad("labels[1]"))
			})
		}
	}
	// Everything else is a label: spaces, punctuation, any script, emoji.
	for _, label := range []string{"a b", "Über-wichtig", "請求書", "🔥 hot", "x\u00a0y", "\u00a0", "a/b:c", strings.Repeat("é", 64)} {
		qt.Check(t, v.Body("updateMessageLabels", []byte(obj(nil, map[string]any{"addLabels": []string{label}}))), qt.IsNil, qt.Commentf("%q", label))
		_, err := v.Query("listMessages", url.Values{"labels": {label}})
		qt.Check(t, err, qt.IsNil, qt.Commentf("%q", label))
	}
	err := v.Body("updateThreadLabels", []byte(`{"addLabels":["red\u001b[0m"]}`))
	qt.Check(t, err, qt.ErrorMatches, `addLabels\[0\]: must be a label of 1-64 characters without control characters`)
}

// ValidLabel is the rule of the schema's label, for the paths that do not read JSON
// bodies (fixtures).
func TestValidLabel(t *testing.T) {
	for label, want := range map[string]bool{
		"unread": true, "a b": true, "請求書": true, strings.Repeat("é", 64): true,
		"": false, strings.Repeat("l", 65): false, "a\nb": false, "\x1b[31m": false, "del\x7f": false, "nel\u0085": false, "nul\x00": false,
	} {
		qt.Check(t, ValidLabel(label), qt.Equals, want, qt.Commentf("%q", label))
	}
	qt.Check(t, LabelRule(), qt.Equals, "a label of 1-64 characters without control characters")
}
