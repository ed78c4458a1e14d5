package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// Tests of the queues several processes take from, and of reads that stream: what the
// contract suite cannot show with one store.

// testClock is a clock the stores of a test share and the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clockedCluster is n stores on one fresh database reading one clock, with an exempt
// account "acme" and its inbox.
func clockedCluster(t *testing.T, n int) (*cluster, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Now().UTC().Truncate(time.Millisecond)}
	c := &cluster{url: pgtest.NewDatabase(t)}
	for range n {
		c.stores = append(c.stores, open(t, c.url, clock.read))
	}
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, c.stores[0], db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, c.stores[0], db.NewInbox{AccountID: "acme", Address: "me@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	c.inbox = in
	return c, clock
}

// send commits a send of one message to rcpts through st.
func send(t *testing.T, st db.Store, in *db.Inbox, key string, rcpts ...string) db.SendResult {
	t.Helper()
	r := sendRequest(in, key, 1000)
	r.Recipients, r.Message.To, r.Message.Timestamp = rcpts, rcpts, st.Now()
	stamp := db.Time{Time: st.Now()}.String()
	r.Message.Delivery = &db.Delivery{Version: 1, SentAt: stamp, UpdatedAt: stamp}
	for _, a := range rcpts {
		r.Message.Delivery.Recipients = append(r.Message.Delivery.Recipients, db.RecipientDelivery{Recipient: a, Status: db.RecipientQueued})
	}
	res, err := db.CommitSend(context.Background(), st, r)
	qt.Assert(t, err, qt.IsNil)
	return res
}

// The dispatchers of several processes claiming the outbound queue at once never take
// one row twice, and a row one process holds is not another's until its lease ends (a
// process's one dispatcher may take its own rows again: a row it left for its next pass).
func TestOutboundClaimsAreDisjointAcrossProcesses(t *testing.T) {
	c, clock := clockedCluster(t, 3)
	ctx := context.Background()
	for i := range 40 {
		send(t, c.stores[0], c.inbox, fmt.Sprintf("k%d", i), fmt.Sprintf("r%d@far.test", i))
	}
	claimed := make([][]db.OutboundJob, 3)
	errs := c.each(3, func(i int, st *postgres.Store) (err error) {
		claimed[i], err = st.ClaimOutbound(ctx, 14)
		return err
	})
	holder := map[int64]int{}
	seen := map[int64]bool{}
	for i, err := range errs {
		qt.Assert(t, err, qt.IsNil)
		for _, j := range claimed[i] {
			qt.Assert(t, seen[j.ID], qt.IsFalse, qt.Commentf("row %d claimed twice", j.ID))
			seen[j.ID], holder[j.ID] = true, i
		}
	}
	qt.Assert(t, seen, qt.HasLen, 40)
	// Held by their claimers: no other process takes them, whatever it recovers.
	rec, err := c.stores[1].RecoverOutbound(ctx, "relay")
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, rec, qt.Equals, db.OutboundRecovery{})
	clock.advance(time.Minute)
	for i, st := range c.stores {
		jobs, err := st.ClaimOutbound(ctx, 100)
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, jobs, qt.HasLen, len(claimed[i]))
		for _, j := range jobs {
			qt.Assert(t, holder[j.ID], qt.Equals, i, qt.Commentf("row %d held by another process", j.ID))
		}
	}
}

// heldRows are the rows of one send a process holds: claimed by its dispatcher, the first
// handed to the relay, the second being attempted.
type heldRows struct {
	claimed            []db.OutboundJob
	handed, attempting *db.OutboundJob
}

// holdRelayRows makes holder claim the queue's rows, route the first two to the relay and
// take them: the first handed off, the second attempting. The survivor's outbound worker
// has started before (RecoverOutbound).
func holdRelayRows(t *testing.T, holder, survivor *postgres.Store) heldRows {
	t.Helper()
	ctx := context.Background()
	_, err := survivor.RecoverOutbound(ctx, "relay")
	qt.Assert(t, err, qt.IsNil)
	var h heldRows
	h.claimed, err = holder.ClaimOutbound(ctx, 10)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, holder.RouteToRelay(ctx, []int64{h.claimed[0].ID, h.claimed[1].ID}), qt.IsNil)
	h.handed, err = holder.ClaimRelay(ctx)
	qt.Assert(t, err, qt.IsNil)
	ok, err := holder.MarkHandoff(ctx, h.handed.ID)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ok, qt.IsTrue)
	h.attempting, err = holder.ClaimRelay(ctx)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, h.attempting, qt.IsNotNil)
	return h
}

// A process that dies while its relay workers hold rows leaves them to the others once
// the lease ends: a row not yet handed to the relay is sent again by another process, a
// row handed off is recorded accepted, uncertain, and never sent again. The dead process,
// should it come back to life, can neither hand the row off nor record an outcome.
func TestDeadProcessRelayRowsAreTakenOver(t *testing.T) {
	c, clock := clockedCluster(t, 2)
	dead, survivor := c.stores[0], c.stores[1]
	ctx := context.Background()
	res := send(t, dead, c.inbox, "k1", "a@far.test", "b@far.test")
	h := holdRelayRows(t, dead, survivor)
	handed, attempting := h.handed, h.attempting

	none, err := survivor.ClaimOutbound(ctx, 10)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, none, qt.HasLen, 0, qt.Commentf("a live lease is not taken over"))
	clock.advance(31 * time.Minute)
	again, err := survivor.ClaimOutbound(ctx, 10)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, again, qt.HasLen, 1)
	qt.Assert(t, again[0].Recipient, qt.Equals, attempting.Recipient)

	ok, err := dead.MarkHandoff(ctx, attempting.ID)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ok, qt.IsFalse, qt.Commentf("a row taken over is not handed off by its old holder"))
	late := db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDelivered}}
	qt.Assert(t, dead.FinishOutbound(ctx, *handed, late), qt.IsNil)
	qt.Assert(t, dead.FinishOutbound(ctx, *attempting, late), qt.IsNil)

	m, err := survivor.GetMessage(ctx, c.inbox.ID, res.MessageID)
	qt.Assert(t, err, qt.IsNil)
	status := map[string]db.RecipientDelivery{}
	for _, r := range m.Delivery.Recipients {
		status[r.Recipient] = r
	}
	qt.Assert(t, status[handed.Recipient].Status, qt.Equals, db.RecipientAccepted)
	qt.Assert(t, status[handed.Recipient].Reason, qt.Equals, db.UncertainReason)
	qt.Assert(t, status[attempting.Recipient].Status, qt.Equals, db.RecipientQueued, qt.Commentf("the old holder's outcome is not recorded"))
	counts, err := survivor.OutboundCounts(ctx)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, counts, qt.DeepEquals, map[string]int{"ready": 1, "relay": 0, "attempting": 0, "handoff": 0})
}

// Two processes finishing two recipients of one message at once keep both answers in its
// delivery record.
func TestConcurrentOutcomesOfOneMessageKeepBoth(t *testing.T) {
	c, _ := clockedCluster(t, 2)
	ctx := context.Background()
	rcpts := make([]string, 8)
	for i := range rcpts {
		rcpts[i] = fmt.Sprintf("r%d@far.test", i)
	}
	res := send(t, c.stores[0], c.inbox, "k1", rcpts...)
	jobs := make([][]db.OutboundJob, 2)
	for i, st := range c.stores {
		var err error
		jobs[i], err = st.ClaimOutbound(ctx, 4)
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, jobs[i], qt.HasLen, 4)
	}
	errs := c.each(8, func(i int, st *postgres.Store) error {
		return st.FinishOutbound(ctx, jobs[i%2][i/2], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDelivered}})
	})
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
	m, err := c.stores[1].GetMessage(ctx, c.inbox.ID, res.MessageID)
	qt.Assert(t, err, qt.IsNil)
	for _, r := range m.Delivery.Recipients {
		qt.Assert(t, r.Status, qt.Equals, db.RecipientDelivered, qt.Commentf("recipient %s", r.Recipient))
	}
	qt.Assert(t, m.Delivery.Version, qt.Equals, 9)
}

// The webhook workers of several processes never claim one delivery twice.
func TestWebhookClaimsAreDisjointAcrossProcesses(t *testing.T) {
	c, _ := clockedCluster(t, 3)
	ctx := context.Background()
	_, err := db.CreateWebhook(ctx, c.stores[0], db.NewWebhook{AccountID: "acme", URL: "http://127.0.0.1:9/hook"})
	qt.Assert(t, err, qt.IsNil)
	for i := range 30 {
		m := received(c.inbox, fmt.Sprintf("<w%d@far.test>", i))
		m.Timestamp = c.stores[0].Now()
		_, err := db.Deliver(ctx, c.stores[i%3], []db.NewMessage{m})
		qt.Assert(t, err, qt.IsNil)
	}
	claimed := make([][]db.HookJob, 6)
	errs := c.each(6, func(i int, st *postgres.Store) (err error) {
		claimed[i], err = st.ClaimHookDeliveries(ctx, db.HookClaim{Limit: 10, PerWebhook: 10, Lease: time.Minute})
		return err
	})
	seen := map[int64]bool{}
	for i, err := range errs {
		qt.Assert(t, err, qt.IsNil)
		for _, j := range claimed[i] {
			qt.Assert(t, seen[j.Row], qt.IsFalse, qt.Commentf("delivery %d claimed twice", j.Row))
			seen[j.Row] = true
		}
	}
	qt.Assert(t, seen, qt.HasLen, 30)
}

// A large attachment and a large raw message are stored in chunks and read back whole,
// from any offset; a download whose message is deleted meanwhile ends not_found.
func TestLargeBodiesStreamInChunks(t *testing.T) {
	c, _ := clockedCluster(t, 2)
	ctx := context.Background()
	content := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640,000 bytes: three chunks
	m := received(c.inbox, "<big@far.test>")
	m.Timestamp = c.stores[0].Now()
	m.Raw = append([]byte("Subject: big\r\n\r\n"), content...)
	m.Trace = "Received: by test\r\n"
	m.Attachments = []db.NewAttachment{{Filename: "big.bin", ContentType: "application/octet-stream", Content: content}}
	_, err := db.Deliver(ctx, c.stores[0], []db.NewMessage{m})
	qt.Assert(t, err, qt.IsNil)

	reader := c.stores[1]
	got, err := reader.GetMessage(ctx, c.inbox.ID, "<big@far.test>")
	qt.Assert(t, err, qt.IsNil)
	raw, err := reader.MessageRaw(ctx, got.ID)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, bytes.Equal(raw, append([]byte(m.Trace), m.Raw...)), qt.IsTrue)

	_, body, err := reader.OpenAttachment(ctx, c.inbox.UUID, got.UUID, got.Attachments[0].AttachmentID)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, body.Size(), qt.Equals, int64(len(content)))
	all, err := io.ReadAll(body)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, bytes.Equal(all, content), qt.IsTrue)
	_, err = body.Seek(300000, io.SeekStart)
	qt.Assert(t, err, qt.IsNil)
	tail, err := io.ReadAll(body)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, bytes.Equal(tail, content[300000:]), qt.IsTrue)

	_, body, err = reader.OpenAttachment(ctx, c.inbox.UUID, got.UUID, got.Attachments[0].AttachmentID)
	qt.Assert(t, err, qt.IsNil)
	first := make([]byte, 1000)
	_, err = io.ReadFull(body, first)
	qt.Assert(t, err, qt.IsNil)
	_, err = c.stores[0].PurgeInbox(ctx, c.inbox.ID)
	qt.Assert(t, err, qt.IsNil)
	_, err = io.ReadAll(body)
	qt.Assert(t, db.ErrorCode(err), qt.Equals, db.ECodeNotFound)
}

// A process that is gone (its sessions closed, as when it is killed) leaves its rows to
// the others at once, without waiting for their leases to end.
func TestGoneProcessRowsAreTakenOverAtOnce(t *testing.T) {
	c, _ := clockedCluster(t, 2)
	gone, survivor := c.stores[0], c.stores[1]
	ctx := context.Background()
	res := send(t, gone, c.inbox, "k1", "a@far.test", "b@far.test", "c@far.test")
	h := holdRelayRows(t, gone, survivor)
	handed, attempting, dispatching := h.handed, h.attempting, h.claimed[2] // the third stays with its dispatcher
	qt.Assert(t, gone.Close(), qt.IsNil)

	var err error

	var taken []db.OutboundJob
	for deadline := time.Now().Add(10 * time.Second); len(taken) == 0 && time.Now().Before(deadline); {
		taken, err = survivor.ClaimOutbound(ctx, 10) // the server drops the sessions a moment after the close
		qt.Assert(t, err, qt.IsNil)
		if len(taken) == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	recipients := map[string]bool{}
	for _, j := range taken {
		recipients[j.Recipient] = true
	}
	qt.Assert(t, recipients, qt.DeepEquals, map[string]bool{attempting.Recipient: true, dispatching.Recipient: true})
	m, err := survivor.GetMessage(ctx, c.inbox.ID, res.MessageID)
	qt.Assert(t, err, qt.IsNil)
	for _, r := range m.Delivery.Recipients {
		if r.Recipient == handed.Recipient {
			qt.Assert(t, r.Status, qt.Equals, db.RecipientAccepted)
			qt.Assert(t, r.Reason, qt.Equals, db.UncertainReason)
		}
	}
}

// A thread's aggregates stay true while one process adds replies to it and another
// relabels it (each relabel recomputes them) at once.
func TestThreadAggregatesHoldUnderConcurrentWriters(t *testing.T) {
	c, _ := clockedCluster(t, 2)
	ctx := context.Background()
	root := received(c.inbox, "<root@far.test>")
	stored, err := db.Deliver(ctx, c.stores[0], []db.NewMessage{root})
	qt.Assert(t, err, qt.IsNil)
	errs := c.each(40, func(i int, st *postgres.Store) error {
		if i%2 == 1 {
			return db.UpdateThreadLabels(ctx, st, c.inbox.ID, stored[0].ThreadID, []string{fmt.Sprintf("x%d", i)}, nil)
		}
		m := received(c.inbox, fmt.Sprintf("<r%d@far.test>", i))
		m.InReplyTo, m.ThreadCandidates = "<root@far.test>", []string{"<root@far.test>"}
		_, err := db.Deliver(ctx, st, []db.NewMessage{m})
		return err
	})
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
	threads, _, err := c.stores[1].ListThreads(ctx, c.inbox.ID, db.MessageFilter{}, 10, "")
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, threads, qt.HasLen, 1)
	qt.Assert(t, threads[0].MessageCount, qt.Equals, 21)
	whole, err := c.stores[1].GetThread(ctx, c.inbox.ID, stored[0].ThreadID, false)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, whole.Messages, qt.HasLen, 21)
	qt.Assert(t, threads[0].LastMessageID, qt.Equals, whole.Messages[20].MessageID)
}
