package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// Tests of what holds across several processes on one database: each "process" is a
// store of its own (its own pool and listener) on the same database.

// cluster is n stores on one fresh database with an exempt account "acme" and its inbox.
type cluster struct {
	url    string
	stores []*postgres.Store
	inbox  *db.Inbox
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	url := pgtest.NewDatabase(t)
	c := &cluster{url: url}
	for range n {
		c.stores = append(c.stores, open(t, url, time.Now))
	}
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, c.stores[0], db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	var err error
	c.inbox, err = db.CreateInbox(ctx, c.stores[0], db.NewInbox{AccountID: "acme", Address: "me@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	return c
}

// freeAccount makes the account "bee" on the free plan, and its inbox.
func (c *cluster) freeAccount(t *testing.T) *db.Inbox {
	t.Helper()
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, c.stores[0], db.Account{ID: "bee", Plan: "free"}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, c.stores[0], db.NewInbox{AccountID: "bee", Address: "bee@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	return in
}

// each runs fn n times at once, spread over the stores, and returns the errors.
func (c *cluster) each(n int, fn func(i int, st *postgres.Store) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i, c.stores[i%len(c.stores)])
		}()
	}
	wg.Wait()
	return errs
}

func sendRequest(in *db.Inbox, key string, rateLimit int) db.SendRequest {
	now := time.Now()
	return db.SendRequest{AccountID: in.AccountID, IdempotencyKey: key, Fingerprint: []byte(key), Recipients: []string{"bob@far.test"},
		RateLimit: rateLimit, Message: db.NewMessage{InboxID: in.ID, MessageID: "<" + key + "@x.test>", Direction: db.Sent, From: in.Address,
			To: []string{"bob@far.test"}, Subject: "sent " + key, Text: "text", Timestamp: now, Labels: db.InitialLabels(db.Sent, false, nil),
			Raw: []byte("Subject: sent " + key + "\r\n\r\ntext\r\n")}}
}

// One idempotency key sent through several processes at once is one send: every answer
// names the same message, and all but one are deduplicated.
func TestIdempotencyHoldsAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3)
	results := make([]db.SendResult, 9)
	errs := c.each(9, func(i int, st *postgres.Store) (err error) {
		results[i], err = db.CommitSend(context.Background(), st, sendRequest(c.inbox, "same", 100))
		return err
	})
	fresh := 0
	for i, err := range errs {
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, results[i].MessageID, qt.Equals, "<same@x.test>")
		if !results[i].Deduplicated {
			fresh++
		}
	}
	qt.Assert(t, fresh, qt.Equals, 1)
}

// An inbox's send rate holds across processes: of twelve sends at once with a limit of
// five, five are sent and the rest are rate_limited.
func TestSendRateHoldsAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3)
	errs := c.each(12, func(i int, st *postgres.Store) error {
		_, err := db.CommitSend(context.Background(), st, sendRequest(c.inbox, fmt.Sprintf("k%d", i), 5))
		return err
	})
	qt.Assert(t, granted(t, errs, db.ECodeRateLimited), qt.Equals, 5)
}

// An account's billing limit holds across processes: of ten sends at once on an account
// with one unit left, one is sent and the rest are refused with billing_limit.
func TestBillingLimitHoldsAcrossProcesses(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	in := c.freeAccount(t)
	free, _ := db.PlanByID("free")
	qt.Assert(t, c.stores[0].SetUsage(ctx, "bee", db.FeatureSends, db.IncludedUnits(free, db.FeatureSends)-1), qt.IsNil)
	errs := c.each(10, func(i int, st *postgres.Store) error {
		_, err := db.CommitSend(ctx, st, sendRequest(in, fmt.Sprintf("k%d", i), 100))
		return err
	})
	qt.Assert(t, granted(t, errs, db.ECodeBillingLimit), qt.Equals, 1)
}

// An account's triage allowance holds across processes when mail analyzed before it is
// stored arrives on two processes at once while the triage worker charges claims of the
// same account: with seven units left, exactly seven of the charges are spent (the
// messages that kept their triage plus the worker's charges that passed), the rest are
// refused (a message stored with no triage, a worker charge billing_limit), and the usage
// report counts the allowance exactly, never over it.
func TestTriageAllowanceHoldsUnderConcurrentIngest(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	in := c.freeAccount(t)
	free, _ := db.PlanByID("free")
	limit := db.IncludedUnits(free, db.FeatureTriage)
	qt.Assert(t, c.stores[0].SetUsage(ctx, "bee", db.FeatureTriage, limit-7), qt.IsNil)

	const deliveries, charges = 16, 8
	errs := c.each(deliveries+charges, func(i int, st *postgres.Store) error {
		if i >= deliveries {
			return st.Update(ctx, func(tx db.Tx) error { return db.Charge(tx, "bee", db.FeatureTriage, tx.Now()) })
		}
		m := received(in, fmt.Sprintf("<pre%d@far.test>", i))
		m.Triage, m.ChargeTriage, m.QueueTriage = &db.Triage{Status: db.TriageComplete, Version: 1}, true, false
		_, err := db.Deliver(ctx, st, []db.NewMessage{m})
		return err
	})
	kept := 0
	for i := range deliveries {
		qt.Assert(t, errs[i], qt.IsNil)
		m, err := c.stores[i%2].GetMessage(ctx, in.ID, fmt.Sprintf("<pre%d@far.test>", i))
		qt.Assert(t, err, qt.IsNil)
		if m.Triage != nil {
			qt.Assert(t, m.Triage.Status, qt.Equals, db.TriageComplete)
			kept++
		}
	}
	qt.Assert(t, kept+granted(t, errs[deliveries:], db.ECodeBillingLimit), qt.Equals, 7)
	qt.Assert(t, triageUsed(t, c.stores[1], "bee"), qt.Equals, limit)
}

// Mail analyzed before it is stored, arriving on two processes at once on an account far
// from its limit, is charged one triage unit a message, each kept.
func TestTriageUsageIsExactAfterConcurrentIngest(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	in := c.freeAccount(t)
	const n = 24
	errs := c.each(n, func(i int, st *postgres.Store) error {
		// Replies to one thread as well as new threads: a reply charges after its thread's lock.
		m := received(in, fmt.Sprintf("<m%d@far.test>", i))
		if i%2 == 1 {
			m.ThreadCandidates = []string{"<m0@far.test>"}
		}
		m.Triage, m.ChargeTriage, m.QueueTriage = &db.Triage{Status: db.TriageComplete, Version: 1}, true, false
		_, err := db.Deliver(ctx, st, []db.NewMessage{m, received(c.inbox, fmt.Sprintf("<m%d@far.test>", i))})
		return err
	})
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
	qt.Assert(t, triageUsed(t, c.stores[0], "bee"), qt.Equals, int64(n))
}

// triageUsed is the triage units an account spent this period, as its usage report says.
func triageUsed(t *testing.T, st *postgres.Store, account string) int64 {
	t.Helper()
	u, err := st.GetUsage(context.Background(), account)
	qt.Assert(t, err, qt.IsNil)
	for _, f := range u.Features {
		if f.Feature == db.FeatureTriage {
			return f.Used
		}
	}
	t.Fatalf("no triage in the usage of %s", account)
	return 0
}

// granted counts the nil errors of errs; every other must carry code.
func granted(t *testing.T, errs []error, code string) int {
	t.Helper()
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
			continue
		}
		qt.Assert(t, db.ErrorCode(err), qt.Equals, code, qt.Commentf("%v", err))
	}
	return n
}

// One Message-ID delivered to an inbox through several processes at once is stored once.
func TestConcurrentDeliveriesOfOneMessageStoreItOnce(t *testing.T) {
	c := newCluster(t, 2)
	stored := make([][]db.Stored, 6)
	errs := c.each(6, func(i int, st *postgres.Store) (err error) {
		stored[i], err = db.Deliver(context.Background(), st, []db.NewMessage{received(c.inbox, "<dup@far.test>")})
		return err
	})
	fresh := 0
	for i, err := range errs {
		qt.Assert(t, err, qt.IsNil)
		if !stored[i][0].Existed {
			fresh++
		}
	}
	qt.Assert(t, fresh, qt.Equals, 1)
}

func received(in *db.Inbox, messageID string) db.NewMessage {
	return db.NewMessage{InboxID: in.ID, MessageID: messageID, Direction: db.Received, From: "ann@far.test", To: []string{in.Address},
		Subject: "about " + messageID, Text: "body", Preview: "body", Timestamp: time.Now(), Labels: db.InitialLabels(db.Received, false, nil),
		Triage: &db.Triage{Status: db.TriagePending}, QueueTriage: true, Raw: []byte("Message-ID: " + messageID + "\r\n\r\nbody\r\n")}
}

// Processes claiming triage at once never take the same message, and a message whose
// claim was not finished is claimed again once its lease has run out.
func TestTriageClaimsAreLeasedAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3)
	ctx := context.Background()
	for i := range 30 {
		_, err := db.Deliver(ctx, c.stores[0], []db.NewMessage{received(c.inbox, fmt.Sprintf("<t%d@far.test>", i))})
		qt.Assert(t, err, qt.IsNil)
	}
	claimed := make([][]int64, 6)
	errs := c.each(6, func(i int, st *postgres.Store) error {
		return st.Update(ctx, func(tx db.Tx) error {
			due, err := tx.DueTriage(tx.Now(), 5, nil)
			claimed[i] = claimed[i][:0]
			for _, d := range due {
				claimed[i] = append(claimed[i], d.Job.MessageRow)
				if !d.Job.LeaseEnds.After(tx.Now()) {
					return fmt.Errorf("message %d claimed with its lease over at %v", d.Job.MessageRow, d.Job.LeaseEnds)
				}
			}
			return err
		})
	})
	seen := map[int64]bool{}
	for i, err := range errs {
		qt.Assert(t, err, qt.IsNil)
		for _, row := range claimed[i] {
			qt.Assert(t, seen[row], qt.IsFalse, qt.Commentf("message %d claimed twice", row))
			seen[row] = true
		}
	}
	qt.Assert(t, seen, qt.HasLen, 30)
	later := func(st *postgres.Store, at time.Time) (n int) {
		qt.Assert(t, st.Update(ctx, func(tx db.Tx) error {
			due, err := tx.DueTriage(at, 100, nil)
			n = len(due)
			return err
		}), qt.IsNil)
		return n
	}
	qt.Assert(t, later(c.stores[1], time.Now()), qt.Equals, 0)
	qt.Assert(t, later(c.stores[2], time.Now().Add(time.Hour)), qt.Equals, 30)
}

// A reader that follows the event log and the change log by seq, while several processes
// append to them at once, never skips an entry: nothing commits with a seq below one a
// reader has passed (log.go).
func TestLogReadersSkipNothingWhileProcessesAppend(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url)
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close(ctx)
	done := make(chan struct{})
	seen := map[string]map[int64]bool{"events": {}, "index_queue": {}}
	readerDone := make(chan error, 1)
	go func() {
		cursor := map[string]int64{}
		for {
			finished := false
			select {
			case <-done:
				finished = true // one more read after the writers are done
			default:
			}
			for table := range seen {
				rows, err := conn.Query(ctx, "SELECT seq FROM "+table+" WHERE seq > $1 ORDER BY seq", cursor[table])
				if err != nil {
					readerDone <- err
					return
				}
				seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					readerDone <- err
					return
				}
				for _, s := range seqs {
					seen[table][s] = true
					cursor[table] = s
				}
			}
			if finished {
				readerDone <- nil
				return
			}
		}
	}()
	errs := c.each(16, func(i int, st *postgres.Store) error {
		for j := range 15 {
			if _, err := db.Deliver(ctx, st, []db.NewMessage{received(c.inbox, fmt.Sprintf("<m%d.%d@far.test>", i, j))}); err != nil {
				return err
			}
		}
		return nil
	})
	close(done)
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
	qt.Assert(t, <-readerDone, qt.IsNil)
	for table, got := range seen {
		rows, err := conn.Query(ctx, "SELECT seq FROM "+table)
		qt.Assert(t, err, qt.IsNil)
		all, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		qt.Assert(t, err, qt.IsNil)
		missed := 0
		for _, s := range all {
			if !got[s] {
				missed++
			}
		}
		qt.Assert(t, missed, qt.Equals, 0, qt.Commentf("%s: the reader skipped %d of %d entries", table, missed, len(all)))
		qt.Assert(t, len(all) >= 16*15, qt.IsTrue)
	}
}

// A key revoked, an account disabled or an inbox deleted through one process is refused
// by another that had it cached, within a second (extensions section 9).
func TestChangesToKeysAndInboxesReachOtherProcesses(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.stores[0], c.stores[1]
	ctx := context.Background()
	k := db.NewAccountKey("acme", db.AllScopes(), 30, time.Now())
	qt.Assert(t, db.CreateKey(ctx, a, k), qt.IsNil)
	_, err := b.Authenticate(ctx, k.Token) // cached by b
	qt.Assert(t, err, qt.IsNil)
	_, err = b.InboxByAddress(ctx, "acme", c.inbox.Address)
	qt.Assert(t, err, qt.IsNil)

	qt.Assert(t, a.SetAccountDisabled(ctx, "acme", true), qt.IsNil)
	within(t, func() bool { _, err := b.Authenticate(ctx, k.Token); return db.IsCode(err, db.ECodeAccessDenied) })
	qt.Assert(t, a.SetAccountDisabled(ctx, "acme", false), qt.IsNil)
	within(t, func() bool { _, err := b.Authenticate(ctx, k.Token); return err == nil })

	keys, err := a.ListKeys(ctx, "acme")
	qt.Assert(t, err, qt.IsNil)
	_, err = a.RevokeKey(ctx, keys[0].KeyID)
	qt.Assert(t, err, qt.IsNil)
	within(t, func() bool { _, err := b.Authenticate(ctx, k.Token); return db.IsCode(err, db.ECodeUnauthorized) })

	qt.Assert(t, a.DeleteInbox(ctx, c.inbox), qt.IsNil)
	within(t, func() bool {
		_, err := b.InboxByAddress(ctx, "acme", c.inbox.Address)
		return db.IsCode(err, db.ECodeInboxRetired)
	})
}

// within fails t unless ok holds within a second.
func within(t *testing.T, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the other process did not see the change within 1 s")
		}
	}
}

// A process whose connections the server dropped (a restart, a failover) still hears the
// next commits of the others: its listener connects again.
func TestListenerComesBackAfterItsConnectionIsDropped(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url)
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	qt.Assert(t, err, qt.IsNil)
	// The first wake may be the listener's own, when it connects again; the second is a
	// notification it heard.
	for wakes, i := 0, 0; wakes < 2; i++ {
		woken := c.stores[1].EventsCommitted()
		_, err := db.Deliver(ctx, c.stores[0], []db.NewMessage{received(c.inbox, fmt.Sprintf("<after%d@far.test>", i))})
		if err != nil {
			qt.Assert(t, db.ErrorCode(err), qt.Equals, db.ECodeUnavailable, qt.Commentf("%v", err))
			continue
		}
		select {
		case <-woken:
			wakes++
		case <-time.After(time.Second):
			qt.Assert(t, i < 5, qt.IsTrue, qt.Commentf("the listener did not come back"))
		}
	}
}

// An inbox deleted on one process while another stores replies into its threads is
// deleted, and every delivery either lands before the deletion (and goes with it) or is
// refused with a model error: none is stored in the retired inbox after it, and no
// foreign key violation surfaces as an internal error.
func TestDeleteInboxWhileRepliesArriveOnAnotherProcess(t *testing.T) {
	for round := range 5 {
		c := newCluster(t, 2)
		ctx := context.Background()
		_, err := db.Deliver(ctx, c.stores[1], []db.NewMessage{received(c.inbox, "<first@far.test>")})
		qt.Assert(t, err, qt.IsNil)
		errs := c.each(21, func(i int, _ *postgres.Store) error {
			if i == 10 {
				return c.stores[0].DeleteInbox(ctx, c.inbox)
			}
			m := received(c.inbox, fmt.Sprintf("<reply%d-%d@far.test>", round, i))
			m.ThreadCandidates = []string{"<first@far.test>"}
			_, err := db.Deliver(ctx, c.stores[1], []db.NewMessage{m})
			return err
		})
		for i, err := range errs {
			if err == nil {
				continue
			}
			var de *db.Error
			qt.Assert(t, i != 10 && errors.As(err, &de), qt.IsTrue, qt.Commentf("call %d: %v", i, err))
		}
		left, _, err := c.stores[1].ListMessages(ctx, c.inbox.ID, db.MessageFilter{}, 100, "")
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, left, qt.HasLen, 0, qt.Commentf("mail stored in the inbox after its deletion"))
	}
}

// A process whose triage lease ran out, and whose message another process has claimed
// since, cannot undo that claim with its late retry: no process claims the message again
// while the other holds it (a retry once cleared the other's lease, and the message was
// analyzed twice).
func TestLateTriageRetryKeepsTheTakeover(t *testing.T) {
	c, clock := clockedCluster(t, 2)
	ctx := context.Background()
	late, taker := c.stores[0], c.stores[1]
	_, err := db.Deliver(ctx, late, []db.NewMessage{received(c.inbox, "<t1@far.test>")})
	qt.Assert(t, err, qt.IsNil)
	first, err := db.ClaimTriage(ctx, late, clock.read(), 10, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, first, qt.HasLen, 1)
	clock.advance(first[0].LeaseEnds.Sub(clock.read()) + time.Second)
	second, err := db.ClaimTriage(ctx, taker, clock.read(), 10, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, second, qt.HasLen, 1)
	retry := first[0].Outcome()
	retry.RetryAt = clock.read()
	notKept, err := late.FinishTriage(ctx, []db.TriageOutcome{retry})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, notKept, qt.DeepEquals, []int64{first[0].MessageRow})
	again, err := db.ClaimTriage(ctx, late, clock.read(), 10, nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, again, qt.HasLen, 0, qt.Commentf("claimed again while the other process holds it"))
}
