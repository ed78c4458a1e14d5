package storetest

import (
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// since reads an inbox's messages from a moment on and returns their Message-IDs.
func (e *env) since(f db.MessageFilter, q db.SinceQuery) []string {
	e.Helper()
	msgs, err := e.st.MessagesSince(e.ctx, e.inbox.ID, f, q)
	e.Assert(err, qt.IsNil)
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.MessageID)
	}
	return out
}

func sinceTests() []test {
	return []test{
		{"messages from a moment on come oldest first, in pages", func(e *env) {
			e.receive(e.mail(e.inbox, "<old@far.test>"))
			from := e.clock()
			st := e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(e.inbox, "<b@far.test>"), e.mail(e.inbox, "<c@far.test>"))
			e.Assert(e.since(db.MessageFilter{}, db.SinceQuery{Since: from, Limit: 10}), qt.DeepEquals,
				[]string{"<a@far.test>", "<b@far.test>", "<c@far.test>"})
			e.Assert(e.since(db.MessageFilter{}, db.SinceQuery{Since: from, Limit: 2}), qt.DeepEquals, []string{"<a@far.test>", "<b@far.test>"})
			b := e.message(e.inbox, "<b@far.test>")
			after := db.KeyOf(b)
			e.Assert(e.since(db.MessageFilter{}, db.SinceQuery{Since: from, After: &after, Limit: 10}), qt.DeepEquals, []string{"<c@far.test>"})
			e.Assert(e.since(db.MessageFilter{}, db.SinceQuery{Since: from, Rows: []int64{st[2].RowID, st[0].RowID}, Limit: 10}),
				qt.DeepEquals, []string{"<a@far.test>", "<c@far.test>"})
			e.Assert(e.since(db.MessageFilter{}, db.SinceQuery{Since: from, Rows: []int64{}, Limit: 10}), qt.HasLen, 0)
			e.Assert(e.since(db.MessageFilter{}, db.SinceQuery{Since: e.clock().Add(time.Hour), Limit: 10}), qt.HasLen, 0)
		}},
		{"messages from a moment on pass the list filter", func(e *env) {
			from := e.clock()
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(e.inbox, "<b@far.test>"), e.held(e.inbox, "<h@far.test>", cleanScan()))
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<a@far.test>", []string{"vip"}, nil), qt.IsNil)
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<b@far.test>", []string{db.LabelTrash}, nil), qt.IsNil)
			all := db.SinceQuery{Since: from, Limit: 10}
			e.Assert(e.since(db.MessageFilter{}, all), qt.DeepEquals, []string{"<a@far.test>"})
			e.Assert(e.since(db.MessageFilter{Labels: []string{db.LabelReceived, "vip"}}, all), qt.DeepEquals, []string{"<a@far.test>"})
			e.Assert(e.since(db.MessageFilter{Labels: []string{"nope"}}, all), qt.HasLen, 0)
			e.Assert(e.since(db.MessageFilter{Labels: []string{db.LabelTrash}}, all), qt.DeepEquals, []string{"<b@far.test>"})
			e.Assert(e.since(db.MessageFilter{Labels: []string{db.LabelQuarantined}}, all), qt.DeepEquals, []string{"<h@far.test>"})
		}},
	}
}
