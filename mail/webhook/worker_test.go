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

// countingReceiver is an endpoint that takes a while to answer and counts what it gets:
// each event by webhook-id, and the most requests it had in flight at once.
type countingReceiver struct {
	*httptest.Server
	inFlight, most atomic.Int32
	mu             sync.Mutex
	seen           map[string]int
}

func newCountingReceiver(t *testing.T, answerAfter time.Duration) *countingReceiver {
	rc := &countingReceiver{seen: map[string]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rc.inFlight.Add(1)
		defer rc.inFlight.Add(-1)
		for m := rc.most.Load(); n > m && !rc.most.CompareAndSwap(m, n); m = rc.most.Load() {
		}
		time.Sleep(answerAfter)
		rc.mu.Lock()
		rc.seen[r.Header.Get("webhook-id")]++
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	return rc
}

// eachOnce checks that the receiver got n events, each once.
func (rc *countingReceiver) eachOnce(c *qt.C, n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c.Assert(rc.seen, qt.HasLen, n)
	for id, times := range rc.seen {
		c.Assert(times, qt.Equals, 1, qt.Commentf("event %s", id))
	}
}

// hangingReceiver is an endpoint that counts its requests (hits) and, while hang is set,
// answers none of them until the client gives up.
func hangingReceiver(t *testing.T) (rc *httptest.Server, hang *atomic.Bool, hits *atomic.Int32) {
	hang, hits = new(atomic.Bool), new(atomic.Int32)
	hang.Store(true)
	release := make(chan struct{})
	rc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if hang.Load() {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(func() { close(release); rc.Close() })
	return rc, hang, hits
}

// A delivery whose attempt was cut short by a stop is delivered by the worker of the next
// start on the same database, at once: the stopped worker gave it back.
func TestDeliveriesSurviveARestart(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	rc, hang, hits := hangingReceiver(t)

	path := filepath.Join(t.TempDir(), "inboxd.db")
	st := open(t, path)
	in, hook := hookSetup(t, st, rc.URL)
	_, err := db.Deliver(ctx, st, []db.NewMessage{{InboxID: in.ID, MessageID: "<a@far.test>", Direction: db.Received,
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
	rc := newCountingReceiver(t, 400*time.Millisecond)
	st := open(t, filepath.Join(t.TempDir(), "inboxd.db"))
	in, hook := hookSetup(t, st, rc.URL)
	var err error
	const n = 6
	for i := range n {
		_, err = db.Deliver(ctx, st, []db.NewMessage{{InboxID: in.ID, MessageID: fmt.Sprintf("<%d@far.test>", i), Direction: db.Received,
			From: "ann@far.test", To: []string{in.Address}, Subject: "hi", Text: "hi", Timestamp: time.Now(),
			Labels: db.InitialLabels(db.Received, false, nil), Raw: []byte("Subject: hi\r\n\r\nhi\r\n")}})
		c.Assert(err, qt.IsNil)
	}

	// One slot, and a lease that covers an attempt and a little of waiting: the second
	// delivery of a claim would start too late, and the six answers take longer than a
	// lease. The timeout is well above the receiver's 400 ms, so that no attempt fails on
	// a loaded machine (its retry would be a second request for the same event).
	stop := run(st, webhook.Config{PerWebhook: 1, Timeout: 1500 * time.Millisecond, Lease: 1800 * time.Millisecond})
	defer stop()
	waitDelivered(t, st, hook, n, 30*time.Second)
	rc.eachOnce(c, n)
	c.Assert(rc.most.Load(), qt.Equals, int32(1))
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

// deliverMail stores n messages in inbox in, one unit of work each, from a few goroutines
// at once, as SMTP sessions would.
func deliverMail(t *testing.T, st db.Store, in *db.Inbox, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				_, err := db.Deliver(context.Background(), st, []db.NewMessage{{InboxID: in.ID, MessageID: fmt.Sprintf("<%d@far.test>", i),
					Direction: db.Received, From: "ann@far.test", To: []string{in.Address}, Subject: "hi", Text: "hi", Timestamp: time.Now(),
					Labels: db.InitialLabels(db.Received, false, nil), Raw: []byte("Subject: hi\r\n\r\nhi\r\n")}})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
}

// waitDelivered waits until the webhook's n deliveries are delivered, each in one attempt.
func waitDelivered(t *testing.T, st db.Store, hook *db.Webhook, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ds, _, err := st.ListHookDeliveries(context.Background(), "acme", hook.WebhookID, 100, "")
		qt.Assert(t, err, qt.IsNil)
		done := 0
		for _, d := range ds {
			if d.Status == db.HookDelivered {
				qt.Assert(t, d.Attempt, qt.Equals, 1)
				done++
			}
		}
		if done == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d delivered", done, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hookSetup makes the account, an inbox and a webhook to url.
func hookSetup(t *testing.T, st db.Store, url string) (*db.Inbox, *db.Webhook) {
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, st, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, st, db.NewInbox{AccountID: "acme", Address: "me@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	hook, err := db.CreateWebhook(ctx, st, db.NewWebhook{AccountID: "acme", URL: url})
	qt.Assert(t, err, qt.IsNil)
	return in, hook
}

// Mail that arrives faster than a slow endpoint takes it, while the worker runs, is
// delivered whole and each event once: what the worker has room for is handed to it as it
// commits, the rest is claimed once it has room again.
func TestMailFasterThanTheEndpointIsDeliveredOnce(t *testing.T) {
	c := qt.New(t)
	rc := newCountingReceiver(t, 5*time.Millisecond)
	st := open(t, filepath.Join(t.TempDir(), "inboxd.db"))
	in, hook := hookSetup(t, st, rc.URL)

	// One slot: the worker holds at most four deliveries of the webhook.
	stop := run(st, webhook.Config{PerWebhook: 1, MaxInFlight: 1})
	defer stop()
	const n = 40
	deliverMail(t, st, in, n)
	waitDelivered(t, st, hook, n, 10*time.Second)
	rc.eachOnce(c, n)
}

// Deliveries handed to a worker as their mail committed, and not yet made when it stops,
// are made at once by the worker of the next start: the stopped one gave them back.
func TestHandedOverDeliveriesSurviveAStop(t *testing.T) {
	c := qt.New(t)
	rc, hang, hits := hangingReceiver(t)
	path := filepath.Join(t.TempDir(), "inboxd.db")
	st := open(t, path)
	in, hook := hookSetup(t, st, rc.URL)

	cfg := webhook.Config{PerWebhook: 1, Timeout: 3 * time.Second} // and a lease of a minute more
	stop := run(st, cfg)
	deliverMail(t, st, in, 3)
	for hits.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	stop() // one mid-attempt, two waiting for the slot
	c.Assert(st.Close(), qt.IsNil)

	hang.Store(false)
	st = open(t, path)
	stop = run(st, cfg)
	defer stop()
	waitDelivered(t, st, hook, 3, 2*time.Second)
}
