package server_test

import (
	"context"
	"net/url"
	"testing"

	qt "github.com/frankban/quicktest"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inboxd/inboxd/schema"
)

// A full message always carries cc and replyTo, and a sent one bcc, as arrays even when
// empty, as the hosted service answers (extensions section 7); a list item carries none.
func TestFullMessagesCarryAddressListsAsArrays(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	got := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "hi", "text": "hello"})
	m := e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(got["messageId"].(string)), e.full, nil)
	qt.Assert(t, m["cc"], qt.DeepEquals, []any{})
	qt.Assert(t, m["replyTo"], qt.DeepEquals, []any{})
	_, hasBcc := m["bcc"]
	qt.Assert(t, hasBcc, qt.IsFalse) // received mail has no bcc

	sent := e.ok("send", "POST", inboxPath(box)+"/messages/send", e.full, map[string]any{"to": []string{"bob@far.example"},
		"subject": "out", "text": "x", "idempotencyKey": "k1"})
	m = e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(sent["messageId"].(string)), e.full, nil)
	qt.Assert(t, m["bcc"], qt.DeepEquals, []any{})
	qt.Assert(t, m["cc"], qt.DeepEquals, []any{})

	thread := e.ok("getThread", "GET", inboxPath(box)+"/threads/"+got["threadId"].(string)+"?includeBodies=true", e.full, nil)
	qt.Assert(t, thread["messages"].([]any)[0].(map[string]any)["cc"], qt.DeepEquals, []any{})

	for _, item := range e.ok("listMessages", "GET", inboxPath(box)+"/messages?labels=sent", e.full, nil)["messages"].([]any) {
		for _, field := range []string{"cc", "bcc", "replyTo"} {
			_, ok := item.(map[string]any)[field]
			qt.Assert(t, ok, qt.IsFalse, qt.Commentf("list item has %s", field))
		}
	}
}

// MCP lists a key's tools in the order of the spec's table, and a tool the key may not use
// answers a tool result with forbidden, as the hosted server does (extensions section 7).
func TestMCPToolsInTableOrderAndForbiddenAsToolResult(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("ops")
	cs := e.mcpSession(e.readOnly)
	res, err := cs.ListTools(context.Background(), nil)
	qt.Assert(t, err, qt.IsNil)
	var want []string
	for _, op := range schema.Operations() {
		if !op.NoTool && op.Method == "GET" {
			want = append(want, op.Tool)
		}
	}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
	}
	qt.Assert(t, got, qt.DeepEquals, want)
	qt.Assert(t, got[0], qt.Equals, "list_inboxes")

	failed := toolFails(t, cs, 403, "forbidden", "send", map[string]any{"inboxId": in, "to": []string{in}, "text": "x", "idempotencyKey": "k"})
	qt.Assert(t, failed["message"], qt.Contains, "messages:send")
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	qt.Assert(t, err, qt.Not(qt.IsNil)) // an unknown tool stays a protocol error
}
