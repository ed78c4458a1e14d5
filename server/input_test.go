package server_test

import (
	"net/url"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// errMessage is the message of an error response.
func errMessage(t *testing.T, r response) string {
	t.Helper()
	msg, _ := r.json(t)["error"].(map[string]any)["message"].(string)
	return msg
}

// A label with a control character is refused wherever a label enters: send, reply, both
// label updates, the list filters and the MCP tools, naming the label; nothing is written.
func TestLabelsRefuseControlCharacters(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	e.deliver(in, db.NewMessage{MessageID: "<m@x.test>", From: "a@x.test", Subject: "s", Text: "t"})
	thread := e.ok("getMessage", "GET", msgPath(in, "<m@x.test>"), e.full, nil)["threadId"].(string)
	const rule = ": must be a label of 1-64 characters without control characters"
	for _, label := range []string{"a\nb", "x\r\nBcc: evil@example.test", "\x1b[2Jred", "tab\there", "del\x7f", "next\u0085line"} {
		pair := []string{"ok", label}
		for _, tt := range []struct {
			method, path, field string
			body                map[string]any
		}{
			{"POST", inboxPath(in) + "/messages/send", "labels[1]", map[string]any{"to": []string{"x@example.test"}, "text": "hi", "idempotencyKey": "k", "labels": pair}},
			{"POST", msgPath(in, "<m@x.test>") + "/reply", "labels[1]", map[string]any{"text": "hi", "idempotencyKey": "r", "labels": pair}},
			{"PATCH", msgPath(in, "<m@x.test>") + "/labels", "addLabels[1]", map[string]any{"addLabels": pair}},
			{"PATCH", msgPath(in, "<m@x.test>") + "/labels", "removeLabels[1]", map[string]any{"removeLabels": pair}},
			{"PATCH", inboxPath(in) + "/threads/" + thread + "/labels", "addLabels[1]", map[string]any{"addLabels": pair}},
			{"PATCH", inboxPath(in) + "/threads/" + thread + "/labels", "removeLabels[1]", map[string]any{"removeLabels": pair}},
		} {
			r := e.fails(422, "invalid_argument", tt.method, tt.path, e.full, tt.body)
			c.Check(errMessage(t, r), qt.Equals, tt.field+rule, qt.Commentf("%s %q", tt.path, label))
		}
		for _, list := range []string{"/messages", "/threads"} {
			r := e.fails(422, "invalid_argument", "GET", inboxPath(in)+list+"?labels=ok&labels="+url.QueryEscape(label), e.full, nil)
			c.Check(errMessage(t, r), qt.Equals, "labels[1]"+rule)
		}
	}
	cs := e.mcpSession(e.full)
	err := toolFails(t, cs, 422, "invalid_argument", "update_message_labels", map[string]any{"inboxId": in, "messageId": "<m@x.test>", "addLabels": []string{"a\nb"}})
	c.Check(err["message"], qt.Equals, "addLabels[0]"+rule)
	err = toolFails(t, cs, 422, "invalid_argument", "list_threads", map[string]any{"inboxId": in, "labels": []string{"\x1b"}})
	c.Check(err["message"], qt.Equals, "labels[0]"+rule)

	// Nothing was sent or relabelled.
	c.Assert(e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=sent", e.full, nil)["messages"], qt.HasLen, 0)
	c.Assert(e.ok("getMessage", "GET", msgPath(in, "<m@x.test>"), e.full, nil)["labels"], qt.DeepEquals, []any{"received", "unread"})
}
