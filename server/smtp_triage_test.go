package server_test

import (
	"context"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/mail/triage"
)

// With a provider that answers at once (the built-in model), mail is stored already
// triaged and charged one triage unit: nothing waits in the queue. Quarantined mail is not
// analyzed: it waits in the queue, pending, for its release. Once the allowance is spent,
// mail is stored with no triage at all.
func TestSMTPTriageBeforeStore(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	model, err := triage.NewBuiltin()
	c.Assert(err, qt.IsNil)
	addr, store := newSMTPWith(t, protect.Config{}, "free", func(c *mail.Config) { c.TriageNow = model.Result })
	in, err := store.InboxByAddress(ctx, "acme", "support@"+testDomain)
	c.Assert(err, qt.IsNil)
	triageOf := func(id string) *db.Triage {
		m, err := store.GetMessage(ctx, in.ID, id)
		c.Assert(err, qt.IsNil)
		return m.Triage
	}
	used := func() int64 {
		u, err := store.GetUsage(ctx, "acme")
		c.Assert(err, qt.IsNil)
		for _, f := range u.Features {
			if f.Feature == db.FeatureTriage {
				return f.Used
			}
		}
		return 0
	}
	queued := func() int64 {
		n, err := store.TriageQueueLen(ctx)
		c.Assert(err, qt.IsNil)
		return n
	}

	outage := "From: Ann <ann@sender.example>\r\nTo: support@inboxd.test\r\nSubject: Production outage - checkout down\r\n" +
		"Message-ID: <outage@sender.example>\r\n\r\nYour API has been returning 500 errors and our checkout is down. Can you escalate this right away?\r\n"
	c.Assert(sendSMTP(t, addr, "ann@sender.example", outage), qt.IsNil)
	tr := triageOf("<outage@sender.example>")
	c.Assert(tr, qt.IsNotNil)
	c.Assert(tr.Status, qt.Equals, db.TriageComplete)
	c.Assert(tr.Model, qt.Equals, triage.ModelName)
	c.Assert(tr.Category.Value, qt.Equals, "support")
	c.Assert(used(), qt.Equals, int64(1))
	c.Assert(queued(), qt.Equals, int64(0))
	support, _, err := store.ListMessages(ctx, in.ID, db.MessageFilter{Category: "support"}, 10, "")
	c.Assert(err, qt.IsNil)
	c.Assert(support, qt.HasLen, 1)

	c.Assert(sendSMTP(t, addr, "prizes@sender.example", spamMail("spam@smtp")), qt.IsNil)
	c.Assert(triageOf("<spam@smtp>").Status, qt.Equals, db.TriagePending)
	c.Assert(used(), qt.Equals, int64(1))
	c.Assert(queued(), qt.Equals, int64(1))

	c.Assert(store.SetUsage(ctx, "acme", db.FeatureTriage, 500), qt.IsNil) // the free plan's allowance
	spent := "From: Ann <ann@sender.example>\r\nTo: support@inboxd.test\r\nSubject: Lunch?\r\n" +
		"Message-ID: <spent@sender.example>\r\n\r\nAre you free for lunch on Friday?\r\n"
	c.Assert(sendSMTP(t, addr, "ann@sender.example", spent), qt.IsNil)
	c.Assert(triageOf("<spent@sender.example>"), qt.IsNil)
	c.Assert(used(), qt.Equals, int64(500))
	c.Assert(queued(), qt.Equals, int64(1))
}
