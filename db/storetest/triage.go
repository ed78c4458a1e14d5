package storetest

import (
	"strings"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// queued is received mail waiting for triage.
func (e *env) queued(in *db.Inbox, messageID string) db.NewMessage {
	m := e.mail(in, messageID)
	m.Triage, m.QueueTriage = &db.Triage{Status: db.TriagePending}, true
	return m
}

func (e *env) claim(limit int, skip ...int64) []db.TriageJob {
	e.Helper()
	jobs, err := db.ClaimTriage(e.ctx, e.st, e.clock(), limit, skip)
	e.Assert(err, qt.IsNil)
	return jobs
}

// finishTriage records outcomes and returns the message rows of those not kept.
func (e *env) finishTriage(outcomes ...db.TriageOutcome) []int64 {
	e.Helper()
	notKept, err := e.st.FinishTriage(e.ctx, outcomes)
	e.Assert(err, qt.IsNil)
	return notKept
}

// complete, failed and retry are the outcomes of an analysis of j, made by j's claim.
func complete(j db.TriageJob) db.TriageOutcome {
	yes := true
	o := j.Outcome()
	o.Result = &db.Triage{Status: db.TriageComplete, Version: 1,
		Category:   &db.TriageCategory{Value: "personal", Confidence: 0.9, Probabilities: map[string]float64{"personal": 0.9}},
		NeedsReply: &db.TriageNeedsReply{Value: &yes, Probability: 0.8}}
	return o
}

func failed(j db.TriageJob) db.TriageOutcome {
	o := j.Outcome()
	o.Result = &db.Triage{Status: db.TriageFailed, Code: "provider_error"}
	return o
}

func retry(at time.Time) func(db.TriageJob) db.TriageOutcome {
	return func(j db.TriageJob) db.TriageOutcome {
		o := j.Outcome()
		o.RetryAt = at
		return o
	}
}

// outcomeKind is an outcome a claim may record, by name.
type outcomeKind struct {
	name string
	of   func(db.TriageJob) db.TriageOutcome
}

// eachOutcomeKind receives a message into an inbox of a free account for each kind of
// outcome (a retry due at retryAt), claims it and hands the claim to check.
func (e *env) eachOutcomeKind(retryAt time.Time, check func(kind outcomeKind, in *db.Inbox, id string, claim db.TriageJob)) {
	e.account("bee", "free")
	in := e.newInbox("bee", "b@x.test")
	for _, kind := range []outcomeKind{{"complete", complete}, {"failed", failed}, {"retry", retry(retryAt)}} {
		id := "<" + kind.name + "@far.test>"
		e.receive(e.queued(in, id))
		jobs := e.claim(10)
		e.Assert(jobs, qt.HasLen, 1)
		check(kind, in, id, jobs[0])
	}
}

// notKept records a late outcome of claim and checks that it changed nothing: the message
// keeps its triage status, the account its usage.
func (e *env) notKept(late db.TriageOutcome, in *db.Inbox, id string, status string) {
	e.Helper()
	used := triageUsed(e, in.AccountID)
	e.Assert(e.finishTriage(late), qt.DeepEquals, []int64{late.MessageRow}, qt.Commentf("%s", id))
	e.Assert(e.message(in, id).Triage.Status, qt.Equals, status, qt.Commentf("%s", id))
	e.Assert(triageUsed(e, in.AccountID), qt.Equals, used, qt.Commentf("%s: a unit given back", id))
}

func triageTests() []test {
	return []test{
		{"received mail waits for triage and is claimed with its text", func(e *env) {
			long := e.queued(e.inbox, "<long@far.test>")
			long.Text = strings.Repeat("x", db.TriageTextChars+100)
			e.receive(e.queued(e.inbox, "<t1@far.test>"), long)
			e.Assert(e.queueLen(), qt.Equals, int64(2))
			due, ok := e.nextDue()
			e.Assert(ok, qt.IsTrue)
			e.Assert(due.After(e.clock()), qt.IsFalse)
			jobs := e.claim(10)
			e.Assert(jobs, qt.HasLen, 2)
			e.Assert(jobs[0].MessageID, qt.Equals, "<t1@far.test>")
			e.Assert(jobs[0].AccountID, qt.Equals, "acme")
			e.Assert(jobs[0].Text, qt.Equals, "body of <t1@far.test>")
			e.Assert(len(jobs[1].Text), qt.Equals, db.TriageTextChars+1)
			e.Assert(e.claim(10, jobs[0].MessageRow, jobs[1].MessageRow), qt.HasLen, 0)
		}},
		{"what triage knows besides the words stays with the queued message", func(e *env) {
			bulk := e.queued(e.inbox, "<news@far.test>")
			bulk.TriageSignals = db.TriageSignals{Headers: map[string]string{"List-Unsubscribe": "<https://far.test/u/1>", "Precedence": "bulk"}}
			answer := e.queued(e.inbox, "<answer@far.test>")
			answer.TriageSignals = db.TriageSignals{Headers: map[string]string{"In-Reply-To": "<ours@x.test>"}, RepliesToOurs: true}
			e.receive(bulk, answer, e.queued(e.inbox, "<plain@far.test>"))
			jobs := e.claim(10)
			e.Assert(jobs, qt.HasLen, 3)
			e.Assert(jobs[0].Signals, qt.DeepEquals, bulk.TriageSignals)
			e.Assert(jobs[1].Signals, qt.DeepEquals, answer.TriageSignals)
			e.Assert(jobs[2].Signals, qt.DeepEquals, db.TriageSignals{})
		}},
		{"only mail the inbox sent counts as ours to answer", func(e *env) {
			sent := e.send(e.inbox, "k1", "ann@far.test")
			e.receive(e.mail(e.inbox, "<in@far.test>"))
			other := e.newInbox("acme", "other@x.test")
			for _, c := range []struct {
				inbox *db.Inbox
				ids   []string
				want  bool
			}{
				{e.inbox, []string{sent.MessageID}, true},
				{e.inbox, []string{"<nope@far.test>", sent.MessageID}, true},
				{e.inbox, []string{"<in@far.test>"}, false}, // received, not sent
				{e.inbox, nil, false},
				{other, []string{sent.MessageID}, false},
			} {
				got, err := e.st.SentAny(e.ctx, c.inbox.ID, c.ids)
				e.Assert(err, qt.IsNil)
				e.Assert(got, qt.Equals, c.want, qt.Commentf("%v in %s", c.ids, c.inbox.Address))
			}
		}},
		{"a result takes the message off the queue", func(e *env) {
			e.receive(e.queued(e.inbox, "<t1@far.test>"))
			jobs := e.claim(10)
			e.Assert(e.finishTriage(complete(jobs[0])), qt.HasLen, 0)
			e.Assert(e.queueLen(), qt.Equals, int64(0))
			_, ok := e.nextDue()
			e.Assert(ok, qt.IsFalse)
			m := e.message(e.inbox, "<t1@far.test>")
			e.Assert(m.Triage.Status, qt.Equals, db.TriageComplete)
			page, _, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{NeedsReply: "yes"}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 1)
		}},
		{"a retry comes due later and is not charged again", func(e *env) {
			e.account("bee", "free")
			in := e.newInbox("bee", "b@x.test")
			e.receive(e.queued(in, "<t1@far.test>"))
			jobs := e.claim(10)
			at := e.clock().Add(time.Minute)
			e.Assert(e.finishTriage(retry(at)(jobs[0])), qt.HasLen, 0)
			e.Assert(e.claim(10), qt.HasLen, 0)
			due, ok := e.nextDue()
			e.Assert(ok, qt.IsTrue)
			e.Assert(due.Equal(at), qt.IsTrue, qt.Commentf("due %v, want %v", due, at))
			e.advance(time.Minute)
			jobs = e.claim(10)
			e.Assert(jobs, qt.HasLen, 1)
			e.Assert(jobs[0].Attempts, qt.Equals, 1)
			e.Assert(triageUsed(e, "bee"), qt.Equals, int64(1))
		}},
		{"a failed analysis gives its unit back", func(e *env) {
			e.account("bee", "free")
			in := e.newInbox("bee", "b@x.test")
			e.receive(e.queued(in, "<t1@far.test>"))
			jobs := e.claim(10)
			e.Assert(triageUsed(e, "bee"), qt.Equals, int64(1))
			e.Assert(e.finishTriage(failed(jobs[0])), qt.HasLen, 0)
			e.Assert(triageUsed(e, "bee"), qt.Equals, int64(0))
			e.Assert(e.message(in, "<t1@far.test>").Triage.Status, qt.Equals, db.TriageFailed)
		}},
		{"an outcome for a message that left the queue is not kept", func(e *env) {
			e.eachOutcomeKind(e.clock().Add(time.Minute), func(late outcomeKind, in *db.Inbox, id string, claim db.TriageJob) {
				e.Assert(e.finishTriage(complete(claim)), qt.HasLen, 0)
				e.notKept(late.of(claim), in, id, db.TriageComplete)
				e.Assert(e.queueLen(), qt.Equals, int64(0))
			})
		}},
		{"a claim taken over once its lease ran out is not undone by the late process", func(e *env) {
			e.eachOutcomeKind(e.clock().Add(time.Hour), func(late outcomeKind, in *db.Inbox, id string, first db.TriageJob) {
				if first.LeaseEnds.IsZero() {
					e.Skip("the store's claims lease nothing: its one process works the queue alone")
				}
				e.advance(first.LeaseEnds.Sub(e.clock()) + time.Second)
				taken := e.claim(10)
				e.Assert(taken, qt.HasLen, 1)
				e.notKept(late.of(first), in, id, db.TriagePending)
				e.Assert(e.claim(10), qt.HasLen, 0, qt.Commentf("%s: claimed while the taker holds it", id))
				// The taker's retry counts one failed attempt, the late one none.
				e.Assert(e.finishTriage(retry(e.clock())(taken[0])), qt.HasLen, 0)
				again := e.claim(10)
				e.Assert(again, qt.HasLen, 1)
				e.Assert(again[0].Attempts, qt.Equals, 1, qt.Commentf("%s", id))
				e.Assert(e.finishTriage(complete(again[0])), qt.HasLen, 0)
				e.Assert(e.message(in, id).Triage.Status, qt.Equals, db.TriageComplete)
			})
		}},
		{"a spent triage allowance leaves the message without triage", func(e *env) {
			e.account("bee", "free")
			in := e.newInbox("bee", "b@x.test")
			e.Assert(e.st.SetUsage(e.ctx, "bee", db.FeatureTriage, 500), qt.IsNil)
			e.receive(e.queued(in, "<t1@far.test>"))
			e.Assert(e.claim(10), qt.HasLen, 0)
			e.Assert(e.queueLen(), qt.Equals, int64(0))
			e.Assert(e.message(in, "<t1@far.test>").Triage, qt.IsNil)
		}},
		{"an analysis made before storing is charged with the message", func(e *env) {
			e.account("bee", "free")
			in := e.newInbox("bee", "b@x.test")
			m := e.mail(in, "<pre@far.test>")
			m.Triage, m.ChargeTriage = complete(db.TriageJob{}).Result, true
			e.receive(m)
			e.Assert(triageUsed(e, "bee"), qt.Equals, int64(1))
			e.Assert(e.st.SetUsage(e.ctx, "bee", db.FeatureTriage, 500), qt.IsNil)
			m.MessageID = "<spent@far.test>"
			e.receive(m)
			e.Assert(e.message(in, "<spent@far.test>").Triage, qt.IsNil)
		}},
		{"held mail is not analyzed until it is released", func(e *env) {
			m := e.held(e.inbox, "<held@far.test>", cleanScan())
			e.receive(m)
			e.Assert(e.claim(10), qt.HasLen, 0)
			_, ok := e.nextDue()
			e.Assert(ok, qt.IsFalse)
			released, err := db.ReleaseMessage(e.ctx, e.st, e.reviewID("<held@far.test>"), db.Actor{Name: "admin"})
			e.Assert(err, qt.IsNil)
			e.Assert(released, qt.IsTrue)
			e.Assert(e.claim(10), qt.HasLen, 1)
		}},
	}
}

func triageUsed(e *env, account string) int64 {
	e.Helper()
	u, err := e.st.GetUsage(e.ctx, account)
	e.Assert(err, qt.IsNil)
	for _, f := range u.Features {
		if f.Feature == db.FeatureTriage {
			return f.Used
		}
	}
	return -1
}

func (e *env) queueLen() int64 {
	e.Helper()
	n, err := e.st.TriageQueueLen(e.ctx)
	e.Assert(err, qt.IsNil)
	return n
}

func (e *env) nextDue() (time.Time, bool) {
	e.Helper()
	at, ok, err := e.st.NextTriageDue(e.ctx)
	e.Assert(err, qt.IsNil)
	return at, ok
}
