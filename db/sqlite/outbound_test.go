package sqlite_test

import (
	"context"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// TestRelayHandoffRecovery walks queue rows through the relay states and restarts: a row
// a worker held before the end-of-data dot is sent again, one handed off is not (it is
// recorded accepted with the reason), and rows parked by version 1 come back.
func TestRelayHandoffRecovery(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	a := send(t, s, in, "a", "one@away.test")
	b := send(t, s, in, "b", "two@away.test")
	send(t, s, in, "p", "three@away.test")

	jobs, err := s.ClaimOutbound(ctx, 10)
	c.Assert(err, qt.IsNil)
	c.Assert(jobs, qt.HasLen, 3)
	c.Assert(s.FinishOutbound(ctx, jobs[2], db.OutboundOutcome{Park: true}), qt.IsNil)
	c.Assert(s.RouteToRelay(ctx, []int64{jobs[0].ID, jobs[1].ID}), qt.IsNil)
	jobs, err = s.ClaimOutbound(ctx, 10)
	c.Assert(err, qt.IsNil)
	c.Assert(jobs, qt.HasLen, 0) // routed rows belong to the relay workers now

	j1, err := s.ClaimRelay(ctx)
	c.Assert(err, qt.IsNil)
	j2, err := s.ClaimRelay(ctx)
	c.Assert(err, qt.IsNil)
	none, err := s.ClaimRelay(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(none, qt.IsNil)
	c.Assert(j1.Recipient, qt.Equals, "one@away.test")
	c.Assert(j1.From, qt.Equals, "me@x.test")
	ok, err := s.MarkHandoff(ctx, j1.ID)
	c.Assert(err, qt.IsNil)
	c.Assert(ok, qt.IsTrue)
	counts, err := s.OutboundCounts(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(counts, qt.DeepEquals, map[string]int{"handoff": 1, "attempting": 1, "parked": 1, "ready": 0, "relay": 0})

	// The process dies here. At the next start:
	rec, err := s.RecoverOutbound(ctx, "relay")
	c.Assert(err, qt.IsNil)
	c.Assert(rec, qt.DeepEquals, db.OutboundRecovery{Requeued: 2, Uncertain: 1})
	counts, err = s.OutboundCounts(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(counts, qt.DeepEquals, map[string]int{"ready": 2, "relay": 0, "attempting": 0, "handoff": 0})

	m, err := s.GetMessage(ctx, in.ID, a.MessageID)
	c.Assert(err, qt.IsNil)
	c.Assert(m.Delivery.Version, qt.Equals, 2)
	c.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientAccepted)
	c.Assert(m.Delivery.Recipients[0].Provider, qt.Equals, "relay")
	c.Assert(m.Delivery.Recipients[0].Reason, qt.Equals, db.UncertainReason)

	m, err = s.GetMessage(ctx, in.ID, b.MessageID)
	c.Assert(err, qt.IsNil)
	c.Assert(m.Delivery.Version, qt.Equals, 1) // untouched: it will simply be sent
	jobs, err = s.ClaimOutbound(ctx, 10)
	c.Assert(err, qt.IsNil)
	c.Assert(jobs, qt.HasLen, 2)
	c.Assert(jobs[0].ID, qt.Equals, j2.ID)

	// A handoff for a row that is gone (the inbox was deleted) is refused.
	ok, err = s.MarkHandoff(ctx, 999)
	c.Assert(err, qt.IsNil)
	c.Assert(ok, qt.IsFalse)
}

// TestRelayRetryStaysWithTheRelay reschedules a relay attempt as a relay row.
func TestRelayRetryStaysWithTheRelay(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	send(t, s, in, "a", "one@away.test")
	jobs, _ := s.ClaimOutbound(ctx, 10)
	c.Assert(s.RouteToRelay(ctx, []int64{jobs[0].ID}), qt.IsNil)
	j, err := s.ClaimRelay(ctx)
	c.Assert(err, qt.IsNil)
	now := s.Now()
	c.Assert(s.FinishOutbound(ctx, *j, db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDeferred}, RetryAt: &now}), qt.IsNil)
	counts, _ := s.OutboundCounts(ctx)
	c.Assert(counts, qt.DeepEquals, map[string]int{"ready": 0, "relay": 1, "attempting": 0, "handoff": 0})
	j, err = s.ClaimRelay(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(j.Attempts, qt.Equals, 1)
}

// TestSuppressionIsPerInboxAndPurged keeps a hard bounce on the sending inbox's list only,
// and deleting the inbox purges it.
func TestSuppressionIsPerInboxAndPurged(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	other, err := db.CreateInbox(ctx, s, db.NewInbox{AccountID: "a", Address: "other@x.test", DefaultDomain: "x.test"})
	c.Assert(err, qt.IsNil)
	send(t, s, in, "a", "bad@away.test")
	jobs, _ := s.ClaimOutbound(ctx, 10)
	c.Assert(s.FinishOutbound(ctx, jobs[0], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientBounced,
		SMTPStatusCode: "550", SMTPEnhancedStatusCode: "5.1.1", Reason: "no such user"}, Suppress: true}), qt.IsNil)
	sup, err := s.Suppressions(ctx, in.ID)
	c.Assert(err, qt.IsNil)
	c.Assert(sup, qt.HasLen, 1)
	c.Assert(sup[0].Reason, qt.Equals, "no such user")
	sup, err = s.Suppressions(ctx, other.ID)
	c.Assert(err, qt.IsNil)
	c.Assert(sup, qt.HasLen, 0)

	res := send(t, s, other, "b", "bad@away.test") // another inbox may still send to it
	m, _ := s.GetMessage(ctx, other.ID, res.MessageID)
	c.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientQueued)

	c.Assert(s.DeleteInbox(ctx, in), qt.IsNil)
	sup, err = s.Suppressions(ctx, in.ID)
	c.Assert(err, qt.IsNil)
	c.Assert(sup, qt.HasLen, 0)
}

// TestDeliverBatchIsolatesGroups commits every good group of a batch even when one fails.
func TestDeliverBatchIsolatesGroups(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	msg := func(inbox int64, id string) db.NewMessage {
		return db.NewMessage{InboxID: inbox, MessageID: id, Direction: db.Received, From: "a@b.test", Subject: "s",
			Timestamp: s.Now(), Labels: db.InitialLabels(db.Received, false, nil)}
	}
	stored, errs, err := db.DeliverBatch(ctx, s, [][]db.NewMessage{
		{msg(in.ID, "<1@b>")},
		{msg(in.ID, "<2@b>"), msg(999, "<2@b>")}, // the second copy names no inbox: the group fails whole
		{msg(in.ID, "<3@b>"), msg(in.ID, "<1@b>")},
	})
	c.Assert(err, qt.IsNil)
	c.Assert(errs[0], qt.IsNil)
	c.Assert(errs[1], qt.Not(qt.IsNil))
	c.Assert(errs[2], qt.IsNil)
	c.Assert(stored[1], qt.HasLen, 0)
	c.Assert(stored[2], qt.HasLen, 2)
	c.Assert(stored[2][1].Existed, qt.IsTrue) // de-duplicated against group 0 in the same transaction
	list, _, err := s.ListMessages(ctx, in.ID, db.MessageFilter{}, 10, "")
	c.Assert(err, qt.IsNil)
	c.Assert(list, qt.HasLen, 2)
}

// TestNewThreadAggregatesMatchRefresh checks the shortcut for a thread a message starts:
// the aggregates it writes are those a full refresh computes.
func TestNewThreadAggregatesMatchRefresh(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	at := s.Now()
	msgs := []db.NewMessage{
		{MessageID: "<r@b>", Direction: db.Received, Labels: db.InitialLabels(db.Received, false, nil),
			Attachments: []db.NewAttachment{{Filename: "a.txt", ContentType: "text/plain", Content: []byte("x")}}},
		{MessageID: "<s@b>", Direction: db.Sent, Labels: db.InitialLabels(db.Sent, false, []string{"trash"})},
		{MessageID: "<q@b>", Direction: db.Received, Labels: db.InitialLabels(db.Received, true, nil),
			Protection: &db.Protection{Status: db.ProtectionQuarantined, Reasons: []string{"spam"}}},
	}
	for i := range msgs {
		msgs[i].InboxID, msgs[i].From, msgs[i].Subject, msgs[i].Timestamp = in.ID, "a@b.test", "s", at
	}
	_, err := db.Deliver(ctx, s, msgs)
	c.Assert(err, qt.IsNil)
	list := func() []db.Thread {
		all, _, err := s.ListThreads(ctx, in.ID, db.MessageFilter{Labels: []string{}, IncludeTrash: true}, 10, "")
		c.Assert(err, qt.IsNil)
		q, _, err := s.ListThreads(ctx, in.ID, db.MessageFilter{Labels: []string{db.LabelQuarantined}, IncludeTrash: true}, 10, "")
		c.Assert(err, qt.IsNil)
		return append(all, q...)
	}
	before := list()
	c.Assert(before, qt.HasLen, 3)
	for _, m := range msgs { // a no-op label change runs the full refresh of each thread
		if m.Protection == nil {
			c.Assert(db.UpdateMessageLabels(ctx, s, in.ID, m.MessageID, []string{"x"}, []string{"x"}), qt.IsNil)
		}
	}
	c.Assert(list(), qt.DeepEquals, before)
}
