package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
)

// Units that queue while another runs share one transaction; one that refuses is undone
// alone, and the others commit.
func TestQueuedUnitsShareACommitAndFailAlone(t *testing.T) {
	c := newCluster(t, 1)
	s, ctx := c.stores[0], context.Background()

	refuses := func(i int) bool { return i%3 == 1 }
	const n = 6
	txids := make([]int64, n)
	errs := c.queueTogether(t, n, func(i int) error {
		return s.Update(ctx, func(tx db.Tx) error {
			var err error
			if txids[i], err = postgres.TxID(tx); err != nil {
				return err
			}
			if err := tx.UpsertAccount(db.Account{ID: fmt.Sprintf("acct%d", i), Plan: db.PlanExempt}); err != nil {
				return err
			}
			if refuses(i) {
				return db.Errorf(db.ECodeBillingLimit, "unit %d refuses after writing", i)
			}
			return nil
		})
	})

	var committed []int64
	for i := range n {
		exists, err := accountExists(ctx, s, fmt.Sprintf("acct%d", i))
		qt.Assert(t, err, qt.IsNil)
		if refuses(i) {
			qt.Check(t, db.IsCode(errs[i], db.ECodeBillingLimit), qt.IsTrue, qt.Commentf("unit %d: %v", i, errs[i]))
			qt.Check(t, exists, qt.IsFalse, qt.Commentf("unit %d refused but its account stayed", i))
			continue
		}
		qt.Check(t, errs[i], qt.IsNil)
		qt.Check(t, exists, qt.IsTrue, qt.Commentf("unit %d", i))
		committed = append(committed, txids[i])
	}
	for _, id := range committed {
		qt.Check(t, id, qt.Equals, committed[0], qt.Commentf("the units that queued together committed apart: %v", committed))
	}
}

// queueTogether runs fn n times at once while the committers of c's first store are held
// by units that wait, so that the n units they ask of it queue and then run as one group;
// it returns their errors.
func (c *cluster) queueTogether(t *testing.T, n int, fn func(i int) error) []error {
	t.Helper()
	s := c.stores[0]
	release := holdCommitters(s)
	done := make(chan []error)
	go func() { done <- c.each(n, func(i int, _ *postgres.Store) error { return fn(i) }) }()
	waitQueued(t, s, n)
	release()
	return <-done
}

// holdCommitters holds every committer of s with a unit that waits, until release: the
// units asked of s meanwhile queue, and then run as one group.
func holdCommitters(s *postgres.Store) (release func()) {
	held, free := make(chan struct{}), make(chan struct{})
	for range postgres.Committers {
		var once sync.Once
		go s.Update(context.Background(), func(db.Tx) error {
			once.Do(func() { held <- struct{}{} })
			<-free
			return nil
		})
		<-held
	}
	return func() { close(free) }
}

// waitQueued waits until n units wait for the committers of s.
func waitQueued(t *testing.T, s *postgres.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.UnitsQueued() != n {
		if time.Now().After(deadline) {
			t.Errorf("%d units queued, want %d", s.UnitsQueued(), n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// accountExists reads whether an account exists.
func accountExists(ctx context.Context, s *postgres.Store, id string) (bool, error) {
	var ok bool
	err := s.Update(ctx, func(tx db.Tx) error {
		var err error
		ok, err = tx.AccountExists(id)
		return err
	})
	return ok, err
}

// Mail for two accounts arriving on two processes at once, each message charged a triage
// unit: groups of one process hold the log lock while a later unit of theirs charges the
// other account, whose row a unit of the other process may hold while it waits for the
// log lock. Every message is stored and charged once, and no delivery waits out
// PostgreSQL's deadlock detection.
func TestGroupsOfTwoAccountsOnTwoProcesses(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, c.stores[0], db.Account{ID: "cat", Plan: "free"}, nil), qt.IsNil)
	cat, err := db.CreateInbox(ctx, c.stores[0], db.NewInbox{AccountID: "cat", Address: "cat@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	inboxes := []*db.Inbox{cat, c.freeAccount(t)}
	const n = 48
	var mu sync.Mutex
	var slowest time.Duration
	errs := c.each(n, func(i int, st *postgres.Store) error {
		m := received(inboxes[i/2%2], fmt.Sprintf("<x%d@far.test>", i))
		m.Triage, m.ChargeTriage, m.QueueTriage = &db.Triage{Status: db.TriageComplete, Version: 1}, true, false
		start := time.Now()
		_, err := db.Deliver(ctx, st, []db.NewMessage{m})
		mu.Lock()
		slowest = max(slowest, time.Since(start))
		mu.Unlock()
		return err
	})
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
	qt.Check(t, triageUsed(t, c.stores[0], "cat"), qt.Equals, int64(n/2))
	qt.Check(t, triageUsed(t, c.stores[1], "bee"), qt.Equals, int64(n/2))
	t.Logf("slowest delivery %v", slowest)
}

// Deliveries that commit together each get their event, in the log once, and the
// webhooks of their account each get a delivery of it, whether the account has webhooks
// (its events read them) or not (its events wait for the end of the group).
func TestGroupedDeliveriesRecordTheirEventsAndWebhookDeliveries(t *testing.T) {
	c := newCluster(t, 1)
	s, ctx := c.stores[0], context.Background()
	bee := c.freeAccount(t)
	hook, err := db.CreateWebhook(ctx, s, db.NewWebhook{AccountID: "acme", URL: "http://127.0.0.1:9/hook"})
	qt.Assert(t, err, qt.IsNil)

	const n = 8
	errs := c.queueTogether(t, n, func(i int) error {
		m := received([]*db.Inbox{c.inbox, bee}[i%2], fmt.Sprintf("<g%d@far.test>", i))
		m.Triage, m.ChargeTriage, m.QueueTriage = &db.Triage{Status: db.TriageComplete, Version: 1}, true, false
		_, err := db.Deliver(ctx, s, []db.NewMessage{m})
		return err
	})
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}

	seen := map[string]bool{}
	for _, account := range []string{"acme", "bee"} {
		events, err := s.Events(ctx, 0, db.EventFilter{AccountID: account}, 100)
		qt.Assert(t, err, qt.IsNil)
		got := 0
		for _, e := range events {
			if e.Type != db.EventReceived {
				continue
			}
			qt.Check(t, seen[e.MessageID], qt.IsFalse, qt.Commentf("%s twice", e.MessageID))
			seen[e.MessageID] = true
			got++
		}
		qt.Check(t, got, qt.Equals, n/2, qt.Commentf("events of %s", account))
	}
	ds, _, err := s.ListHookDeliveries(ctx, "acme", hook.WebhookID, 100, "")
	qt.Assert(t, err, qt.IsNil)
	qt.Check(t, len(ds), qt.Equals, n/2)
	qt.Check(t, triageUsed(t, s, "bee"), qt.Equals, int64(n/2))
}
