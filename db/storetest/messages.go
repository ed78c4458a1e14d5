package storetest

import (
	"fmt"
	"io"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func messageTests() []test {
	return []test{
		{"a received message reads back whole", func(e *env) {
			m := e.mail(e.inbox, "<one@far.test>")
			m.Cc, m.HTML = []string{"cc@far.test"}, "<p>hi</p>"
			st := e.receive(m)[0]
			e.Assert(st.Existed, qt.IsFalse)
			got := e.message(e.inbox, "<one@far.test>")
			e.Assert(got.ThreadID, qt.Equals, st.ThreadID)
			e.Assert(got.From, qt.Equals, "ann@far.test")
			e.Assert(got.Cc, qt.DeepEquals, []string{"cc@far.test"})
			e.Assert(got.BodyText, qt.Equals, "body of <one@far.test>")
			e.Assert(got.BodyHTML, qt.Equals, "<p>hi</p>")
			e.Assert(got.Labels, qt.DeepEquals, []string{db.LabelReceived, db.LabelUnread})
			raw, err := e.st.MessageRaw(e.ctx, got.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(string(raw), qt.Equals, string(m.Raw))
		}},
		{"a Message-ID is stored once per inbox", func(e *env) {
			first := e.receive(e.mail(e.inbox, "<dup@far.test>"))[0]
			again := e.receive(e.mail(e.inbox, "<dup@far.test>"))[0]
			e.Assert(again.Existed, qt.IsTrue)
			e.Assert(again.ThreadID, qt.Equals, first.ThreadID)
			page, _, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 1)
		}},
		{"a delivery is stored whole or not at all, alone in a batch", func(e *env) {
			gone := e.mail(e.inbox, "<lost@far.test>")
			gone.InboxID = e.inbox.ID + 1000 // no such inbox: storing it fails
			_, err := db.Deliver(e.ctx, e.st, []db.NewMessage{e.mail(e.inbox, "<with@far.test>"), gone})
			e.Assert(err, qt.Not(qt.IsNil))
			_, err = e.st.GetMessage(e.ctx, e.inbox.ID, "<with@far.test>")
			e.isCode(err, db.ECodeNotFound)
			stored, errs, err := db.DeliverBatch(e.ctx, e.st, [][]db.NewMessage{{e.mail(e.inbox, "<kept@far.test>")}, {gone}})
			e.Assert(err, qt.IsNil)
			e.Assert(errs[0], qt.IsNil)
			e.Assert(errs[1], qt.Not(qt.IsNil))
			e.Assert(stored[1], qt.IsNil)
			e.Assert(e.message(e.inbox, "<kept@far.test>").ThreadID, qt.Equals, stored[0][0].ThreadID)
		}},
		{"a missing message is not found", func(e *env) {
			_, err := e.st.GetMessage(e.ctx, e.inbox.ID, "<nobody@far.test>")
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.MessageRaw(e.ctx, 1<<40)
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.GetThread(e.ctx, e.inbox.ID, "no-such-thread", false)
			e.isCode(err, db.ECodeNotFound)
		}},
		{"a reply joins the thread its headers name", func(e *env) {
			first := e.receive(e.mail(e.inbox, "<q@far.test>"))[0]
			reply := e.mail(e.inbox, "<a@far.test>")
			reply.InReplyTo, reply.ThreadCandidates = "<q@far.test>", []string{"<q@far.test>"}
			second := e.receive(reply, e.mail(e.inbox, "<other@far.test>"))
			e.Assert(second[0].ThreadID, qt.Equals, first.ThreadID)
			e.Assert(second[1].ThreadID, qt.Not(qt.Equals), first.ThreadID)
			t, err := e.st.GetThread(e.ctx, e.inbox.ID, first.ThreadID, true)
			e.Assert(err, qt.IsNil)
			e.Assert(t.MessageCount, qt.Equals, 2)
			e.Assert(t.Messages[0].MessageID, qt.Equals, "<q@far.test>")
			e.Assert(t.Messages[1].BodyText, qt.Equals, "body of <a@far.test>")
			threads, _, err := e.st.ListThreads(e.ctx, e.inbox.ID, db.MessageFilter{}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(threads, qt.HasLen, 2)
			e.Assert(threads[0].ThreadID, qt.Equals, second[1].ThreadID) // newest activity first
		}},
		{"a thread too large to answer whole is refused", func(e *env) {
			first := e.receive(e.mail(e.inbox, "<t0@far.test>"))[0]
			group := make([][]db.NewMessage, db.MaxThreadMessages)
			for i := range group {
				m := e.mail(e.inbox, fmt.Sprintf("<t%d@far.test>", i+1))
				m.ThreadID = first.ThreadID
				group[i] = []db.NewMessage{m}
			}
			_, errs, err := db.DeliverBatch(e.ctx, e.st, group)
			e.Assert(err, qt.IsNil)
			for _, err := range errs {
				e.Assert(err, qt.IsNil)
			}
			_, err = e.st.GetThread(e.ctx, e.inbox.ID, first.ThreadID, false)
			e.isCode(err, db.ECodeThreadTooLarge)
		}},
		{"messages list newest first, by page and by label", func(e *env) {
			for i := range 3 {
				e.receive(e.mail(e.inbox, fmt.Sprintf("<m%d@far.test>", i)))
			}
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<m0@far.test>", []string{"keep"}, nil), qt.IsNil)
			page, next, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{}, 2, "")
			e.Assert(err, qt.IsNil)
			e.Assert(ids(page), qt.DeepEquals, []string{"<m2@far.test>", "<m1@far.test>"})
			page, next, err = e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{}, 2, next)
			e.Assert(err, qt.IsNil)
			e.Assert(ids(page), qt.DeepEquals, []string{"<m0@far.test>"})
			e.Assert(next, qt.Equals, "")
			page, _, err = e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{Labels: []string{"keep"}}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(ids(page), qt.DeepEquals, []string{"<m0@far.test>"})
		}},
		{"a page token of another list is refused", func(e *env) {
			for i := range 2 {
				e.receive(e.mail(e.inbox, fmt.Sprintf("<p%d@far.test>", i)))
			}
			_, next, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{}, 1, "")
			e.Assert(err, qt.IsNil)
			_, _, err = e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{Labels: []string{"x"}}, 1, next)
			e.isCode(err, db.ECodeInvalidArgument)
			_, _, err = e.st.ListThreads(e.ctx, e.inbox.ID, db.MessageFilter{}, 1, next)
			e.isCode(err, db.ECodeInvalidArgument)
			_, _, err = e.st.ListThreads(e.ctx, e.inbox.ID, db.MessageFilter{}, 1, "garbage")
			e.isCode(err, db.ECodeInvalidArgument)
		}},
		{"an attachment is found by its ids and read in parts", func(e *env) {
			m := e.mail(e.inbox, "<att@far.test>")
			m.Attachments = []db.NewAttachment{{Filename: "a.txt", ContentType: "text/plain", Content: []byte("0123456789")}}
			e.receive(m)
			got := e.message(e.inbox, "<att@far.test>")
			e.Assert(got.Attachments, qt.HasLen, 1)
			id := got.Attachments[0].AttachmentID
			a, err := e.st.GetAttachment(e.ctx, e.inbox.ID, "<att@far.test>", id)
			e.Assert(err, qt.IsNil)
			e.Assert(a.Filename, qt.Equals, "a.txt")
			e.Assert(a.Size, qt.Equals, int64(10))
			_, body, err := e.st.OpenAttachment(e.ctx, e.inbox.UUID, got.UUID, id)
			e.Assert(err, qt.IsNil)
			e.Assert(body.Size(), qt.Equals, int64(10))
			_, err = body.Seek(4, io.SeekStart)
			e.Assert(err, qt.IsNil)
			rest, err := io.ReadAll(body)
			e.Assert(err, qt.IsNil)
			e.Assert(string(rest), qt.Equals, "456789")
			_, err = e.st.GetAttachment(e.ctx, e.inbox.ID, "<att@far.test>", "nope")
			e.isCode(err, db.ECodeNotFound)
			_, _, err = e.st.OpenAttachment(e.ctx, e.inbox.UUID, got.UUID, "nope")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"the download key is a stable secret", func(e *env) {
			k := e.st.DownloadKey()
			e.Assert(len(k) >= 16, qt.IsTrue)
			e.Assert(e.st.DownloadKey(), qt.DeepEquals, k)
		}},
	}
}

func ids(msgs []db.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.MessageID
	}
	return out
}

func labelTests() []test {
	return []test{
		{"labels are added and removed, removal winning", func(e *env) {
			e.receive(e.mail(e.inbox, "<l@far.test>"))
			err := db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<l@far.test>", []string{"a", "b"}, []string{"b", db.LabelUnread})
			e.Assert(err, qt.IsNil)
			e.Assert(e.message(e.inbox, "<l@far.test>").Labels, qt.DeepEquals, []string{"a", db.LabelReceived})
		}},
		{"a thread change reaches every message of the thread", func(e *env) {
			first := e.receive(e.mail(e.inbox, "<t1@far.test>"))[0]
			reply := e.mail(e.inbox, "<t2@far.test>")
			reply.ThreadID = first.ThreadID
			e.receive(reply)
			e.Assert(db.UpdateThreadLabels(e.ctx, e.st, e.inbox.ID, first.ThreadID, []string{"done"}, nil), qt.IsNil)
			for _, id := range []string{"<t1@far.test>", "<t2@far.test>"} {
				e.Assert(e.message(e.inbox, id).Labels, qt.Contains, "done")
			}
		}},
		{"the quarantined label is the dashboard's", func(e *env) {
			e.receive(e.mail(e.inbox, "<q@far.test>"))
			err := db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<q@far.test>", []string{db.LabelQuarantined}, nil)
			e.isCode(err, db.ECodeQuarantineReview)
			err = db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<q@far.test>", nil, []string{db.LabelQuarantined})
			e.isCode(err, db.ECodeQuarantineReview)
		}},
		{"held mail keeps its labels until it is released", func(e *env) {
			e.receive(e.held(e.inbox, "<held@far.test>", cleanScan()))
			err := db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<held@far.test>", []string{"x"}, nil)
			e.isCode(err, db.ECodeQuarantineReview)
			thread := e.message(e.inbox, "<held@far.test>").ThreadID
			err = db.UpdateThreadLabels(e.ctx, e.st, e.inbox.ID, thread, nil, []string{db.LabelUnread})
			e.isCode(err, db.ECodeQuarantineReview)
		}},
		{"labels of a missing message or thread are not found", func(e *env) {
			e.isCode(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<nobody@far.test>", []string{"x"}, nil), db.ECodeNotFound)
			e.isCode(db.UpdateThreadLabels(e.ctx, e.st, e.inbox.ID, "no-thread", []string{"x"}, nil), db.ECodeNotFound)
		}},
	}
}
