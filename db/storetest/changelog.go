package storetest

import (
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// changes reads the whole change log after seq.
func (e *env) changes(after int64) []db.IndexChange {
	e.Helper()
	out, err := e.st.IndexChanges(e.ctx, after, 1000)
	e.Assert(err, qt.IsNil)
	return out
}

func (e *env) advanceReader(reader string, through int64) {
	e.Helper()
	e.Assert(e.st.AdvanceReader(e.ctx, reader, through), qt.IsNil)
}

func (e *env) bounds() (last, first int64) {
	e.Helper()
	last, first, err := e.st.IndexQueueBounds(e.ctx)
	e.Assert(err, qt.IsNil)
	return last, first
}

func changeLogTests() []test {
	return []test{
		{"the store has a stable identity", func(e *env) {
			id, err := e.st.SearchStoreID(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(id, qt.Not(qt.Equals), "")
			again, err := e.st.SearchStoreID(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(again, qt.Equals, id)
		}},
		{"every change to searchable mail is logged in commit order", func(e *env) {
			last, first := e.bounds()
			e.Assert(first, qt.Equals, last+1) // nothing logged yet
			other := e.newInbox("acme", "other@x.test")
			st := e.receive(e.mail(e.inbox, "<c1@far.test>"), e.mail(other, "<c2@far.test>"))
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<c1@far.test>", []string{db.LabelTrash}, nil), qt.IsNil)
			got := e.changes(0)
			e.Assert(got, qt.HasLen, 3)
			e.Assert([]int64{got[0].Message, got[1].Message, got[2].Message}, qt.DeepEquals, []int64{st[0].RowID, st[1].RowID, st[0].RowID})
			e.Assert(got[0].Seq < got[1].Seq && got[1].Seq < got[2].Seq, qt.IsTrue)
			last, err := e.st.IndexQueueLast(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(last, qt.Equals, got[2].Seq)
			mine, err := e.st.IndexInboxChanges(e.ctx, e.inbox.ID, got[0].Seq, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(mine, qt.DeepEquals, []db.IndexChange{got[2]})
			e.Assert(e.changes(got[0].Seq), qt.HasLen, 2)

			e.Assert(e.st.DeleteInbox(e.ctx, other), qt.IsNil)
			drop := e.changes(got[2].Seq)
			e.Assert(drop, qt.HasLen, 1)
			e.Assert(drop[0].Message, qt.Equals, int64(0)) // the whole inbox goes
			e.Assert(drop[0].Inbox, qt.Equals, other.ID)
		}},
		{"two readers follow the log independently", func(e *env) {
			e.receive(e.mail(e.inbox, "<c1@far.test>"), e.mail(e.inbox, "<c2@far.test>"), e.mail(e.inbox, "<c3@far.test>"))
			log := e.changes(0)
			// A reader holds the log from when it first records its cursor.
			e.advanceReader("slow", log[0].Seq)
			e.advanceReader("fast", log[2].Seq)
			// Each reads on from its own cursor; the slower one still finds what it needs.
			e.Assert(e.changes(log[2].Seq), qt.HasLen, 0)
			e.Assert(e.changes(log[0].Seq), qt.DeepEquals, log[1:])
			e.receive(e.mail(e.inbox, "<c4@far.test>"))
			e.Assert(e.changes(log[2].Seq), qt.HasLen, 1)
			e.Assert(e.changes(log[0].Seq), qt.HasLen, 3)
		}},
		{"the log is trimmed only behind the slowest reader", func(e *env) {
			e.receive(e.mail(e.inbox, "<c1@far.test>"), e.mail(e.inbox, "<c2@far.test>"), e.mail(e.inbox, "<c3@far.test>"))
			log := e.changes(0)
			// A reader holds the log from when it first records its cursor.
			e.advanceReader("slow", log[0].Seq)
			e.advanceReader("fast", log[2].Seq)
			last, first := e.bounds()
			e.Assert(last, qt.Equals, log[2].Seq)
			e.Assert(first, qt.Equals, log[1].Seq)
			e.advanceReader("slow", log[1].Seq)
			_, first = e.bounds()
			e.Assert(first, qt.Equals, log[2].Seq)
			e.advanceReader("slow", log[2].Seq)
			last, first = e.bounds()
			e.Assert(first, qt.Equals, last+1) // every reader has it all: the sequence goes on
			e.receive(e.mail(e.inbox, "<c4@far.test>"))
			e.Assert(e.changes(0)[0].Seq, qt.Equals, last+1)
		}},
		{"a reader away past the retention stops holding the log back", func(e *env) {
			e.receive(e.mail(e.inbox, "<c1@far.test>"), e.mail(e.inbox, "<c2@far.test>"))
			log := e.changes(0)
			e.advanceReader("away", log[0].Seq)
			e.advanceReader("here", log[0].Seq)
			e.advance(db.ReaderRetention - time.Minute)
			e.advanceReader("here", log[1].Seq)
			_, first := e.bounds()
			e.Assert(first, qt.Equals, log[1].Seq) // still within the retention: kept for it
			e.advance(2 * time.Minute)
			e.advanceReader("here", log[1].Seq)
			last, first := e.bounds()
			e.Assert(first, qt.Equals, last+1)
			// Back, the reader finds the changes after its cursor gone: it must rebuild.
			e.Assert(first-1 > log[0].Seq, qt.IsTrue)
		}},
		{"a reader needs an id", func(e *env) {
			e.isCode(e.st.AdvanceReader(e.ctx, "", 1), db.ECodeInvalidArgument)
		}},
		{"the searchable messages are what the index holds", func(e *env) {
			m := e.mail(e.inbox, "<d1@far.test>")
			m.Attachments = []db.NewAttachment{{Filename: "plan.pdf", ContentType: "application/pdf", Content: []byte("%PDF")}}
			st := e.receive(m, e.mail(e.inbox, "<d2@far.test>"), e.held(e.inbox, "<held@far.test>", cleanScan()))
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<d2@far.test>", []string{db.LabelTrash}, nil), qt.IsNil)
			docs, err := e.st.IndexDocs(e.ctx, []int64{st[0].RowID, st[1].RowID, st[2].RowID})
			e.Assert(err, qt.IsNil)
			e.Assert(docs, qt.HasLen, 1)
			e.Assert(docs[0].Subject, qt.Equals, "about <d1@far.test>")
			e.Assert(docs[0].Attachments, qt.DeepEquals, []string{"plan.pdf"})
			e.Assert(docs[0].Body, qt.Equals, "body of <d1@far.test>")
			n, err := e.st.CountIndexDocs(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, int64(1))
			scan, err := e.st.ScanIndexDocs(e.ctx, 0, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(scan, qt.HasLen, 1)
			scan, err = e.st.ScanIndexDocs(e.ctx, st[0].RowID, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(scan, qt.HasLen, 0)
		}},
		{"search hits load in the order given, through the filter", func(e *env) {
			st := e.receive(e.mail(e.inbox, "<s1@far.test>"), e.mail(e.inbox, "<s2@far.test>"))
			msgs, err := e.st.MessagesByRowID(e.ctx, e.inbox.ID, []int64{st[1].RowID, st[0].RowID}, db.MessageFilter{})
			e.Assert(err, qt.IsNil)
			e.Assert(ids(msgs), qt.DeepEquals, []string{"<s2@far.test>", "<s1@far.test>"})
			msgs, err = e.st.MessagesByRowID(e.ctx, e.inbox.ID, []int64{st[1].RowID}, db.MessageFilter{Category: "personal"})
			e.Assert(err, qt.IsNil)
			e.Assert(msgs, qt.HasLen, 0)
		}},
		{"a search token is bound to its search", func(e *env) {
			scope := db.SearchScope(e.inbox.ID, "hello", db.MessageFilter{})
			tok := e.st.EncodeSearchToken(scope, db.SearchCursor{Score: 1.5, TS: 42, ID: 7})
			c, err := e.st.DecodeSearchToken(tok, scope)
			e.Assert(err, qt.IsNil)
			e.Assert(*c, qt.Equals, db.SearchCursor{Score: 1.5, TS: 42, ID: 7})
			c, err = e.st.DecodeSearchToken("", scope)
			e.Assert(err, qt.IsNil)
			e.Assert(c, qt.IsNil)
			_, err = e.st.DecodeSearchToken(tok, db.SearchScope(e.inbox.ID, "other", db.MessageFilter{}))
			e.isCode(err, db.ECodeInvalidArgument)
		}},
	}
}
