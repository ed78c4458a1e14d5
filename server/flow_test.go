package server_test

import (
	"net/url"
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestSendReceiveReply walks the path a user takes first: create two inboxes, send from
// one to the other, find the message in the recipient's inbox and thread, reply, and see
// the reply join the thread and clear its triage.
func TestSendReceiveReply(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	alice := e.createInbox("alice")
	bob := e.createInbox("bob")
	c.Assert(alice, qt.Equals, "alice@inboxd.test")

	sent := e.ok("send", "POST", inboxPath(alice)+"/messages/send", e.full, map[string]any{
		"to": []string{bob}, "subject": "Lunch?", "text": "Are you free at noon?", "idempotencyKey": "k1",
	})
	msgID := sent["messageId"].(string)
	c.Assert(sent["deduplicated"], qt.IsNil)

	var received map[string]any
	e.eventually("delivery to bob", func() bool {
		list := e.ok("listMessages", "GET", inboxPath(bob)+"/messages", e.full, nil)
		msgs := list["messages"].([]any)
		if len(msgs) == 0 {
			return false
		}
		received = msgs[0].(map[string]any)
		return true
	})
	c.Assert(received["messageId"], qt.Equals, msgID)
	c.Assert(received["subject"], qt.Equals, "Lunch?")
	c.Assert(received["from"], qt.Equals, alice)
	c.Assert(received["labels"], qt.DeepEquals, []any{"received", "unread"})
	c.Assert(received["triage"], qt.DeepEquals, map[string]any{"status": "pending"})
	c.Assert(received["text"], qt.IsNil) // list items carry no bodies

	full := e.ok("getMessage", "GET", inboxPath(bob)+"/messages/"+url.PathEscape(msgID), e.full, nil)
	c.Assert(full["text"], qt.Equals, "Are you free at noon?")

	// The sender's copy carries the delivery record, delivered locally.
	own := e.ok("getMessage", "GET", inboxPath(alice)+"/messages/"+url.PathEscape(msgID), e.full, nil)
	c.Assert(own["labels"], qt.DeepEquals, []any{"sent"})
	e.eventually("delivery record", func() bool {
		own = e.ok("getMessage", "GET", inboxPath(alice)+"/messages/"+url.PathEscape(msgID), e.full, nil)
		r := own["delivery"].(map[string]any)["recipients"].([]any)[0].(map[string]any)
		return r["status"] == "delivered"
	})

	reply := e.ok("reply", "POST", inboxPath(bob)+"/messages/"+url.PathEscape(msgID)+"/reply", e.full, map[string]any{
		"text": "Yes!", "idempotencyKey": "r1",
	})
	c.Assert(reply["threadId"], qt.Equals, received["threadId"])
	thread := e.ok("getThread", "GET", inboxPath(bob)+"/threads/"+received["threadId"].(string), e.full, nil)
	c.Assert(thread["messageCount"], qt.Equals, 2.0)
	c.Assert(thread["subject"], qt.Equals, "Re: Lunch?")
	c.Assert(thread["triage"], qt.IsNil) // a sent reply clears the thread's triage

	// The reply reaches alice and threads onto her sent message.
	e.eventually("reply delivered to alice", func() bool {
		list := e.ok("listThreads", "GET", inboxPath(alice)+"/threads", e.full, nil)
		ts := list["threads"].([]any)
		return len(ts) == 1 && ts[0].(map[string]any)["messageCount"] == 2.0
	})
}
