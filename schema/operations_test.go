package schema

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestOperationsTable(t *testing.T) {
	c := qt.New(t)
	// The table of API-NOTES section 3, in the spec's order.
	want := []struct{ id, method, path, scope, tool string }{
		{"listInboxes", "GET", "/v1/inboxes", "inboxes:read", "list_inboxes"},
		{"createInbox", "POST", "/v1/inboxes", "inboxes:write", "create_inbox"},
		{"getInbox", "GET", "/v1/inboxes/{inboxId}", "inboxes:read", "get_inbox"},
		{"updateInbox", "PATCH", "/v1/inboxes/{inboxId}", "inboxes:write", "update_inbox"},
		{"deleteInbox", "DELETE", "/v1/inboxes/{inboxId}", "inboxes:write", "delete_inbox"},
		{"finishInboxSetup", "POST", "/v1/inboxes/{inboxId}/setup", "inboxes:write", "finish_inbox_setup"},
		{"listMessages", "GET", "/v1/inboxes/{inboxId}/messages", "messages:read", "list_messages"},
		{"searchMessages", "GET", "/v1/inboxes/{inboxId}/messages/search", "messages:read", "search_messages"},
		{"getMessage", "GET", "/v1/inboxes/{inboxId}/messages/{messageId}", "messages:read", "get_message"},
		{"send", "POST", "/v1/inboxes/{inboxId}/messages/send", "messages:send", "send"},
		{"reply", "POST", "/v1/inboxes/{inboxId}/messages/{messageId}/reply", "messages:send", "reply"},
		{"updateMessageLabels", "PATCH", "/v1/inboxes/{inboxId}/messages/{messageId}/labels", "messages:write", "update_message_labels"},
		{"getAttachment", "GET", "/v1/inboxes/{inboxId}/messages/{messageId}/attachments/{attachmentId}", "messages:read", "get_attachment"},
		{"listThreads", "GET", "/v1/inboxes/{inboxId}/threads", "messages:read", "list_threads"},
		{"getThread", "GET", "/v1/inboxes/{inboxId}/threads/{threadId}", "messages:read", "get_thread"},
		{"updateThreadLabels", "PATCH", "/v1/inboxes/{inboxId}/threads/{threadId}/labels", "messages:write", "update_thread_labels"},
		{"getUsage", "GET", "/v1/usage", "inboxes:read", "get_usage"},
	}
	ops := Operations()
	c.Assert(len(want), qt.Equals, SpecOperations)
	for _, op := range ops[SpecOperations:] {
		c.Check(op.Extension, qt.IsTrue, qt.Commentf(op.ID))
	}
	for i, w := range want {
		op := ops[i]
		c.Check(op.ID, qt.Equals, w.id)
		c.Check(op.Method, qt.Equals, w.method, qt.Commentf(w.id))
		c.Check(op.Path, qt.Equals, w.path, qt.Commentf(w.id))
		c.Check(op.Scope, qt.Equals, w.scope, qt.Commentf(w.id))
		c.Check(op.Tool, qt.Equals, w.tool, qt.Commentf(w.id))
		c.Check(op.Summary, qt.Matches, `[A-Z].*\.`, qt.Commentf(w.id))
	}
}

func TestOperationPathParams(t *testing.T) {
	c := qt.New(t)
	got := map[string][]string{}
	for _, op := range Operations() {
		got[op.ID] = op.PathParams
	}
	c.Check(got["listInboxes"], qt.HasLen, 0)
	c.Check(got["getUsage"], qt.HasLen, 0)
	c.Check(got["getInbox"], qt.DeepEquals, []string{"inboxId"})
	c.Check(got["reply"], qt.DeepEquals, []string{"inboxId", "messageId"})
	c.Check(got["getAttachment"], qt.DeepEquals, []string{"inboxId", "messageId", "attachmentId"})
	c.Check(got["updateThreadLabels"], qt.DeepEquals, []string{"inboxId", "threadId"})
}

func TestOperationsReturnsACopy(t *testing.T) {
	c := qt.New(t)
	ops := Operations()
	ops[0].ID = "changed"
	ops[10].PathParams[0] = "changed"
	again := Operations()
	c.Check(again[0].ID, qt.Equals, "listInboxes")
	c.Check(again[10].PathParams[0], qt.Equals, "inboxId")
}
