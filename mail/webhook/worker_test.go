package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail/webhook"
)

// open opens the store at path, closed when the test ends unless closed before.
func open(t *testing.T, path string) *sqlite.Store {
	st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { st.Close() })
	return st
}

// run runs a worker on st until the returned stop is called.
func run(st db.Store, cfg webhook.Config) (stop func()) {
	cfg.Store = st
	w := webhook.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func pending(t *testing.T, st db.Store, hook *db.Webhook) db.HookDelivery {
	ds, _, err := st.ListHookDeliveries(context.Background(), "acme", hook.WebhookID, 10, "")
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ds, qt.HasLen, 1)
	return ds[0]
}

// A delivery whose attempt was cut short by a stop is delivered by the worker of the next
// start on the same database, at once: the stopped worker gave it back.
func TestDeliveriesSurviveARestart(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	var hang atomic.Bool
	hang.Store(true)
	var hits atomic.Int32
	release := make(chan struct{})
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if hang.Load() {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	defer rc.Close()
	defer close(release)

	path := filepath.Join(t.TempDir(), "inboxd.db")
	st := open(t, path)
	c.Assert(db.EnsureAccount(ctx, st, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, st, db.NewInbox{AccountID: "acme", Address: "me@x.test", DefaultDomain: "x.test"})
	c.Assert(err, qt.IsNil)
	hook, err := db.CreateWebhook(ctx, st, db.NewWebhook{AccountID: "acme", URL: rc.URL})
	c.Assert(err, qt.IsNil)
	_, err = db.Deliver(ctx, st, []db.NewMessage{{InboxID: in.ID, MessageID: "<a@far.test>", Direction: db.Received,
		From: "ann@far.test", To: []string{in.Address}, Subject: "hi", Text: "hi", Timestamp: time.Now(),
		Labels: db.InitialLabels(db.Received, false, nil), Raw: []byte("Subject: hi\r\n\r\nhi\r\n")}})
	c.Assert(err, qt.IsNil)

	cfg := webhook.Config{Timeout: 3 * time.Second} // and a lease of a minute more
	stop := run(st, cfg)
	for hits.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	stop() // mid-attempt: nothing is recorded
	c.Assert(pending(t, st, hook).Attempt, qt.Equals, 0)
	c.Assert(st.Close(), qt.IsNil)

	hang.Store(false)
	st = open(t, path)
	stop = run(st, cfg)
	defer stop()
	deadline := time.Now().Add(2 * time.Second)
	for pending(t, st, hook).Status != db.HookDelivered {
		if time.Now().After(deadline) {
			t.Fatalf("not delivered after the restart: %+v", pending(t, st, hook))
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := pending(t, st, hook)
	c.Assert(d.Attempt, qt.Equals, 1)
	c.Assert(*d.ResponseStatus, qt.Equals, 200)
	c.Assert(hits.Load(), qt.Equals, int32(2))
}

// Deliveries claimed ahead of their webhook's free slots are made one slot at a time,
// each exactly once and delivered, even when some wait so long for a slot that their
// leases could end mid-attempt (those are given back and made later, not made twice).
func TestDeliveriesWaitingForASlotAreMadeOnce(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	var inFlight, most atomic.Int32
	var mu sync.Mutex
	seen := map[string]int{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	defer rc.Close()

	st := open(t, filepath.Join(t.TempDir(), "inboxd.db"))
	c.Assert(db.EnsureAccount(ctx, st, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, st, db.NewInbox{AccountID: "acme", Address: "me@x.test", DefaultDomain: "x.test"})
	c.Assert(err, qt.IsNil)
	hook, err := db.CreateWebhook(ctx, st, db.NewWebhook{AccountID: "acme", URL: rc.URL})
	c.Assert(err, qt.IsNil)
	const n = 6
	for i := range n {
		_, err = db.Deliver(ctx, st, []db.NewMessage{{InboxID: in.ID, MessageID: fmt.Sprintf("<%d@far.test>", i), Direction: db.Received,
			From: "ann@far.test", To: []string{in.Address}, Subject: "hi", Text: "hi", Timestamp: time.Now(),
			Labels: db.InitialLabels(db.Received, false, nil), Raw: []byte("Subject: hi\r\n\r\nhi\r\n")}})
		c.Assert(err, qt.IsNil)
	}

	// One slot, and a lease that covers an attempt and a little of waiting: the third
	// delivery of a claim would start too late.
	stop := run(st, webhook.Config{PerWebhook: 1, Timeout: 300 * time.Millisecond, Lease: 500 * time.Millisecond})
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds, _, err := st.ListHookDeliveries(ctx, "acme", hook.WebhookID, 10, "")
		c.Assert(err, qt.IsNil)
		done := 0
		for _, d := range ds {
			if d.Status == db.HookDelivered {
				c.Assert(d.Attempt, qt.Equals, 1)
				done++
			}
		}
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d delivered", done, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	c.Assert(seen, qt.HasLen, n)
	for id, times := range seen {
		c.Assert(times, qt.Equals, 1, qt.Commentf("event %s", id))
	}
	c.Assert(most.Load(), qt.Equals, int32(1))
}

func TestBackoffFollowsTheContract(t *testing.T) {
	c := qt.New(t)
	for attempt, want := range map[int]float64{1: 5, 2: 10, 3: 20, 10: 2560, 11: 3600, 30: 3600} {
		got := webhook.Backoff(attempt).Seconds()
		c.Assert(got >= want*0.9 && got <= want*1.1, qt.IsTrue, qt.Commentf("attempt %d: %vs, want about %vs", attempt, got, want))
	}
}

// Sign is checked against a signature computed by hand from the Standard Webhooks
// specification's example (secret, id, timestamp and payload as published there).
func TestSignMatchesTheSpecExample(t *testing.T) {
	c := qt.New(t)
	key, err := db.WebhookKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	c.Assert(err, qt.IsNil)
	got := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	c.Assert(got, qt.Equals, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
}
