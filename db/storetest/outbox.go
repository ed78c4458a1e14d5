package storetest

import (
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func (e *env) outbox(f db.OutboxFilter) []db.OutboxItem {
	e.Helper()
	if f.Limit == 0 {
		f.Limit = 100
	}
	items, err := e.st.Outbox(e.ctx, f)
	e.Assert(err, qt.IsNil)
	return items
}

func outboxIDs(items []db.OutboxItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.MessageID)
	}
	return out
}

func testDoubleTests() []test {
	return []test{
		{"the outbox holds sent mail with its MIME, newest first, until cleared", func(e *env) {
			second := e.newInbox("acme", "two@x.test")
			e.send(e.inbox, "k1", "a@far.test")
			e.receive(e.mail(e.inbox, "<in@far.test>"))
			e.send(second, "k2", "B@far.test", "c@far.test")
			items := e.outbox(db.OutboxFilter{})
			e.Assert(outboxIDs(items), qt.DeepEquals, []string{"<k2@x.test>", "<k1@x.test>"})
			e.Assert(items[0].InboxID, qt.Equals, second.InboxID)
			e.Assert(items[0].To, qt.DeepEquals, []string{"B@far.test", "c@far.test"})
			e.Assert(items[0].Raw, qt.Contains, "Subject: sent k2")
			e.Assert(items[0].Delivery.Recipients, qt.HasLen, 2)
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{InboxRow: e.inbox.ID})), qt.DeepEquals, []string{"<k1@x.test>"})
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{To: "b@FAR.test"})), qt.DeepEquals, []string{"<k2@x.test>"})
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{Limit: 1})), qt.DeepEquals, []string{"<k2@x.test>"})

			e.Assert(e.st.ClearOutbox(e.ctx), qt.IsNil)
			e.Assert(e.outbox(db.OutboxFilter{}), qt.HasLen, 0)
			e.send(e.inbox, "k3", "a@far.test")
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{})), qt.DeepEquals, []string{"<k3@x.test>"})
			e.message(e.inbox, "<k1@x.test>") // still in its inbox
		}},
		{"a purge empties one inbox and forgets its idempotency keys", func(e *env) {
			other := e.newInbox("acme", "two@x.test")
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(other, "<b@far.test>"))
			first := e.send(e.inbox, "k1", "a@far.test")
			n, err := e.st.PurgeInbox(e.ctx, e.inbox.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, 2)
			page, _, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{Labels: []string{}}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 0)
			threads, _, err := e.st.ListThreads(e.ctx, e.inbox.ID, db.MessageFilter{}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(threads, qt.HasLen, 0)
			e.message(other, "<b@far.test>")
			again := e.send(e.inbox, "k1", "a@far.test")
			e.Assert(again.Deduplicated, qt.IsFalse)
			e.Assert(again.ThreadID, qt.Not(qt.Equals), first.ThreadID)
		}},
	}
}
