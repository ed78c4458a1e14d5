package postgres_test

import (
	"context"
	"crypto/sha256"
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

// open opens a store on url, closed when t ends.
func open(t *testing.T, url string, now func() time.Time) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{Now: now})
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { s.Close() })
	return s
}

// Processes starting at once on one database share its schema and secrets.
func TestProcessesStartingTogetherShareOneSchema(t *testing.T) {
	url := pgtest.NewDatabase(t)
	stores := make([]*postgres.Store, 3)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(context.Background(), url, postgres.Options{})
			if err != nil {
				t.Errorf("open %d: %v", i, err)
				return
			}
			stores[i] = s
		}()
	}
	wg.Wait()
	for _, s := range stores {
		if s == nil {
			t.FailNow()
		}
		t.Cleanup(func() { s.Close() })
		qt.Assert(t, s.DownloadKey(), qt.DeepEquals, stores[0].DownloadKey())
	}
}

// Two processes creating one account at once both succeed: the second's insert conflicts,
// and its unit runs again.
func TestConflictingUnitsRunAgain(t *testing.T) {
	url := pgtest.NewDatabase(t)
	stores := []*postgres.Store{open(t, url, nil), open(t, url, nil)}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := db.EnsureAccount(ctx, stores[i%2], db.Account{ID: fmt.Sprintf("acct%d", i/4), Plan: db.PlanExempt}, []string{fmt.Sprintf("d%d.test", i/4)})
			if err != nil {
				t.Errorf("ensure account: %v", err)
			}
		}()
	}
	wg.Wait()
	n, err := stores[0].CountAccounts(ctx)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, n, qt.Equals, 2)
}

// A connection the server drops (a failover, a restart) is unavailable and transient for
// the request that meets it, and the store serves the next one on a new connection.
func TestLostConnectionIsUnavailableNotInternal(t *testing.T) {
	url := pgtest.NewDatabase(t)
	s := open(t, url, nil)
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, s, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	conn, err := pgx.Connect(ctx, url)
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	qt.Assert(t, err, qt.IsNil)
	for range 5 {
		_, err := s.Account(ctx, "acme")
		if err != nil {
			qt.Assert(t, db.ErrorCode(err), qt.Equals, db.ECodeUnavailable, qt.Commentf("%v", err))
			var e *db.Error
			qt.Assert(t, errorAs(err, &e) && e.Transient, qt.IsTrue)
		}
	}
	a, err := s.Account(ctx, "acme")
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, a.ID, qt.Equals, "acme")
}

// Events committed by one process wake the readers of another.
func TestEventsCommittedWakesOtherProcesses(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := open(t, url, time.Now), open(t, url, time.Now)
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, a, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, a, db.NewInbox{AccountID: "acme", Address: "me@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	woken := b.EventsCommitted()
	_, err = db.Deliver(ctx, a, []db.NewMessage{{InboxID: in.ID, MessageID: "<m1@far.test>", Direction: db.Received, From: "ann@far.test",
		To: []string{in.Address}, Subject: "hi", Text: "hello", Timestamp: time.Now(), Labels: db.InitialLabels(db.Received, false, nil),
		Raw: []byte("Subject: hi\r\n\r\nhello\r\n")}})
	qt.Assert(t, err, qt.IsNil)
	select {
	case <-woken:
	case <-time.After(time.Second):
		t.Fatal("the other process was not woken within 1 s")
	}
}

func errorAs(err error, target **db.Error) bool { return errors.As(err, target) }

// A session of an operator removed by hand logs no one in, on any process.
func TestSessionOfARemovedOperatorEnds(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a, b := open(t, url, nil), open(t, url, nil)
	ctx := context.Background()
	qt.Assert(t, a.SetOperatorPasswordHash(ctx, "admin", []byte("hash"), "password_set"), qt.IsNil)
	hash := sha256.Sum256([]byte("token"))
	qt.Assert(t, a.CreateDashboardSession(ctx, hash, "admin", a.Now().Add(time.Hour), 10), qt.IsNil)
	sess, err := b.DashboardSession(ctx, hash)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, sess, qt.IsNotNil)
	conn, err := pgx.Connect(ctx, url)
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DELETE FROM operators WHERE name = 'admin'")
	qt.Assert(t, err, qt.IsNil)
	for _, s := range []*postgres.Store{a, b} {
		sess, err := s.DashboardSession(ctx, hash)
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, sess, qt.IsNil)
	}
}

// The store's sessions store large values compressed with lz4 where the server has it
// (Debian's, the tests', does).
func TestSessionsCompressWithLZ4(t *testing.T) {
	s := open(t, pgtest.NewDatabase(t), nil)
	v, err := s.Setting(context.Background(), "default_toast_compression")
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, v, qt.Equals, "lz4")
}
