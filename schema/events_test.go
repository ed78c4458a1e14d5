package schema

import (
	"encoding/json"
	"testing"

	qt "github.com/frankban/quicktest"
)

// The messages of event payloads are views of the message shape (extensions section 1):
// each field an event message carries is the message's field with the same schema, so a
// change to the message shape cannot leave the events behind unnoticed. What the views
// add (bodyTruncated, bodiesOmitted) is theirs alone.
func TestEventMessagesAreViewsOfTheMessage(t *testing.T) {
	src := validator(t).src
	message := src.defs["message"].(map[string]any)["properties"].(map[string]any)
	own := map[string]bool{"bodyTruncated": true, "bodiesOmitted": true}
	for _, def := range []string{"eventMessageWithText", "eventMessageSummary", "eventMessageRef", "eventMessageLabels"} {
		props := src.defs[def].(map[string]any)["properties"].(map[string]any)
		for _, name := range sortedKeys(props) {
			if own[name] {
				continue
			}
			want, ok := message[name]
			qt.Assert(t, ok, qt.IsTrue, qt.Commentf("%s.%s is no field of a message", def, name))
			got := props[name].(map[string]any)
			if name == "text" { // the events cut it (maxLength)
				got = shallowCopy(got)
				delete(got, "maxLength")
			}
			qt.Check(t, got, qt.DeepEquals, want, qt.Commentf("%s.%s", def, name))
		}
	}
}

// An event payload's message is one of the shapes of its type: a summary with text, a
// summary, or the message's ids (with labels); one with a field none of them lists, or
// html, is refused.
func TestEventMessageShapes(t *testing.T) {
	v := validator(t)
	base := example(t, "streamEvents").(map[string]any)
	ref := map[string]any{"messageId": "<a@far.test>", "threadId": "0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90", "inboxId": "alice@example.com"}
	summary := shallowCopy(base["message"].(map[string]any))
	for _, k := range []string{"cc", "replyTo", "text", "bodyTruncated", "bodiesOmitted"} {
		delete(summary, k)
	}
	with := func(m map[string]any, k string, x any) map[string]any { m = shallowCopy(m); m[k] = x; return m }
	for _, tc := range []struct {
		name    string
		message map[string]any
		valid   bool
	}{
		{"summary with text", base["message"].(map[string]any), true},
		{"summary", summary, true},
		{"ids", ref, true},
		{"ids with labels", with(ref, "labels", []any{"vip"}), true},
		{"html", with(base["message"].(map[string]any), "html", "<p>x</p>"), false},
		{"summary with an unknown field", with(summary, "size", 1), false},
		{"ids with an unknown field", with(ref, "size", 1), false},
		{"text without bodyTruncated", with(summary, "text", "x"), false},
		{"bodiesOmitted true", with(base["message"].(map[string]any), "bodiesOmitted", true), false},
	} {
		body, err := json.Marshal(with(base, "message", tc.message))
		qt.Assert(t, err, qt.IsNil)
		err = v.Response("streamEvents", body)
		qt.Check(t, err == nil, qt.Equals, tc.valid, qt.Commentf("%s: %v", tc.name, err))
	}
}
