package storetest

import (
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func sendTests() []test {
	return []test{
		{"a send stores the message, its delivery record and its queue rows", func(e *env) {
			res := e.send(e.inbox, "k1", "a@far.test", "b@far.test")
			m := e.message(e.inbox, res.MessageID)
			e.Assert(m.ThreadID, qt.Equals, res.ThreadID)
			e.Assert(m.Labels, qt.DeepEquals, []string{db.LabelSent})
			e.Assert(m.Delivery.Recipients, qt.HasLen, 2)
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs, qt.HasLen, 2)
		}},
		{"a repeated idempotency key answers the first send again", func(e *env) {
			first := e.send(e.inbox, "k1", "a@far.test")
			again := e.send(e.inbox, "k1", "a@far.test")
			e.Assert(again, qt.DeepEquals, db.SendResult{MessageID: first.MessageID, ThreadID: first.ThreadID, Deduplicated: true})
			r := e.sendRequest(e.inbox, "k1", "a@far.test")
			r.Fingerprint = []byte("other contents")
			_, err := db.CommitSend(e.ctx, e.st, r)
			e.isCode(err, db.ECodeIdempotency)
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs, qt.HasLen, 1)
		}},
		{"a send past the inbox's rate is refused until the window moves", func(e *env) {
			r := e.sendRequest(e.inbox, "k1", "a@far.test")
			r.RateLimit = 1
			_, err := db.CommitSend(e.ctx, e.st, r)
			e.Assert(err, qt.IsNil)
			e.advance(time.Hour)
			r = e.sendRequest(e.inbox, "k2", "a@far.test")
			r.RateLimit = 1
			_, err = db.CommitSend(e.ctx, e.st, r)
			e.isCode(err, db.ECodeRateLimited)
			var de *db.Error
			e.Assert(err, qt.ErrorAs, &de)
			e.Assert(de.Transient, qt.IsTrue)
			e.Assert(de.RetryAfter, qt.Equals, 23*time.Hour)
			e.advance(23 * time.Hour)
			r.Message.Timestamp = e.clock()
			_, err = db.CommitSend(e.ctx, e.st, r)
			e.Assert(err, qt.IsNil)
		}},
		{"a send past the plan's allowance is refused, a repeat is not", func(e *env) {
			e.account("bee", "free")
			in := e.newInbox("bee", "b@x.test")
			first := e.send(in, "k1", "a@far.test")
			e.Assert(e.st.SetUsage(e.ctx, "bee", db.FeatureSends, 1000), qt.IsNil)
			_, err := db.CommitSend(e.ctx, e.st, e.sendRequest(in, "k2", "a@far.test"))
			e.isCode(err, db.ECodeBillingLimit)
			again := e.send(in, "k1", "a@far.test")
			e.Assert(again.MessageID, qt.Equals, first.MessageID)
			_, err = e.st.GetMessage(e.ctx, in.ID, "<k2@x.test>")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"a send with a Message-ID the inbox holds is refused", func(e *env) {
			e.send(e.inbox, "k1", "a@far.test")
			r := e.sendRequest(e.inbox, "k2", "a@far.test")
			r.Message.MessageID = "<k1@x.test>"
			_, err := db.CommitSend(e.ctx, e.st, r)
			e.isCode(err, db.ECodeInvalidArgument)
		}},
		{"a hard bounce suppresses the address for later sends", func(e *env) {
			e.send(e.inbox, "k1", "gone@far.test")
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(e.st.FinishOutbound(e.ctx, jobs[0], db.OutboundOutcome{Suppress: true,
				Update: db.RecipientDelivery{Status: db.RecipientBounced, SMTPStatusCode: "550", Reason: "no such user"}}), qt.IsNil)
			sup, err := e.st.Suppressions(e.ctx, e.inbox.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(sup, qt.HasLen, 1)
			e.Assert(sup[0].Address, qt.Equals, "gone@far.test")

			res := e.send(e.inbox, "k2", "gone@far.test", "ok@far.test")
			m := e.message(e.inbox, res.MessageID)
			e.Assert(m.Labels, qt.Contains, db.LabelBounced)
			status := map[string]string{}
			for _, r := range m.Delivery.Recipients {
				status[r.Recipient] = r.Status
			}
			e.Assert(status, qt.DeepEquals, map[string]string{"gone@far.test": db.RecipientRejected, "ok@far.test": db.RecipientQueued})
			jobs, err = e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs, qt.HasLen, 1)
			e.Assert(jobs[0].Recipient, qt.Equals, "ok@far.test")
		}},
	}
}

func outboundTests() []test {
	return []test{
		{"a deferred delivery comes due again, a final answer stays final", func(e *env) {
			res := e.send(e.inbox, "k1", "a@far.test")
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs[0].From, qt.Equals, e.inbox.Address)
			raw, err := e.st.MessageRaw(e.ctx, jobs[0].MessageRow)
			e.Assert(err, qt.IsNil)
			e.Assert(string(raw), qt.Contains, "Subject: sent k1")
			retry := e.clock().Add(time.Hour)
			e.Assert(e.st.FinishOutbound(e.ctx, jobs[0], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDeferred}, RetryAt: &retry}), qt.IsNil)
			jobs2, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs2, qt.HasLen, 0)
			e.advance(time.Hour)
			jobs2, err = e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs2, qt.HasLen, 1)
			e.Assert(jobs2[0].Attempts, qt.Equals, 1)
			e.Assert(e.st.FinishOutboundBatch(e.ctx, jobs2, []db.OutboundOutcome{{Update: db.RecipientDelivery{Status: db.RecipientDelivered}}}), qt.IsNil)
			e.Assert(e.st.FinishOutbound(e.ctx, jobs2[0], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientBounced}}), qt.IsNil)
			m := e.message(e.inbox, res.MessageID)
			e.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientDelivered)
			e.Assert(m.Delivery.Recipients[0].Delivered, qt.IsTrue)
			e.Assert(m.Delivery.Version, qt.Equals, 3)
		}},
		{"a parked delivery waits for a transport and is recovered", func(e *env) {
			e.send(e.inbox, "k1", "a@far.test")
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(e.st.FinishOutbound(e.ctx, jobs[0], db.OutboundOutcome{Park: true}), qt.IsNil)
			n, err := e.st.ParkedCount(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, int64(1))
			rec, err := e.st.RecoverOutbound(e.ctx, "relay.test")
			e.Assert(err, qt.IsNil)
			e.Assert(rec, qt.Equals, db.OutboundRecovery{Requeued: 1})
			jobs, err = e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs, qt.HasLen, 1)
		}},
		{"a relay job handed off before a stop is recorded accepted, not resent", func(e *env) {
			res := e.send(e.inbox, "k1", "a@far.test", "b@far.test")
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(e.st.RouteToRelay(e.ctx, []int64{jobs[0].ID, jobs[1].ID}), qt.IsNil)
			counts, err := e.st.OutboundCounts(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(counts["relay"], qt.Equals, 2)
			e.Assert(counts["ready"], qt.Equals, 0)
			handed, err := e.st.ClaimRelay(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(string(handed.Raw), qt.Contains, "Subject: sent k1")
			ok, err := e.st.MarkHandoff(e.ctx, handed.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsTrue)
			held, err := e.st.ClaimRelay(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(held, qt.Not(qt.IsNil))
			none, err := e.st.ClaimRelay(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(none, qt.IsNil)
			counts, err = e.st.OutboundCounts(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(counts, qt.DeepEquals, map[string]int{"ready": 0, "relay": 0, "attempting": 1, "handoff": 1})

			rec, err := e.st.RecoverOutbound(e.ctx, "relay.test")
			e.Assert(err, qt.IsNil)
			e.Assert(rec, qt.Equals, db.OutboundRecovery{Requeued: 1, Uncertain: 1})
			for _, r := range e.message(e.inbox, res.MessageID).Delivery.Recipients {
				if r.Recipient == handed.Recipient {
					e.Assert(r.Status, qt.Equals, db.RecipientAccepted)
					e.Assert(r.Reason, qt.Equals, db.UncertainReason)
				}
			}
			ok, err = e.st.MarkHandoff(e.ctx, handed.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsFalse)
			jobs, err = e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs, qt.HasLen, 1)
			e.Assert(jobs[0].Recipient, qt.Equals, held.Recipient)
		}},
	}
}
