package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail/events"
)

// fixture is a store with accounts acme and bee, an inbox each, and a running hub.
type fixture struct {
	*qt.C
	ctx      context.Context
	store    *sqlite.Store
	hub      *events.Hub
	acme, bz *db.Inbox
	n        int
}

func newFixture(t *testing.T, opts events.Options) *fixture {
	return newFixtureAt(t, opts, nil)
}

// newFixtureAt is newFixture with the store reading time from now (nil: the clock).
func newFixtureAt(t *testing.T, opts events.Options, now func() time.Time) *fixture {
	c := qt.New(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "inboxd.db"), sqlite.Options{Now: now})
	c.Assert(err, qt.IsNil)
	t.Cleanup(func() { store.Close() })
	f := &fixture{C: c, ctx: ctx, store: store}
	f.acme = f.inbox("acme", "a@inboxd.test")
	f.bz = f.inbox("bee", "b@inboxd.test")
	opts.Log = slog.New(slog.DiscardHandler)
	f.hub, err = events.New(ctx, store, opts)
	c.Assert(err, qt.IsNil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.hub.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) inbox(account, address string) *db.Inbox {
	f.Assert(db.EnsureAccount(f.ctx, f.store, db.Account{ID: account, Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(f.ctx, f.store, db.NewInbox{AccountID: account, Address: address, DefaultDomain: "inboxd.test"})
	f.Assert(err, qt.IsNil)
	return in
}

// receive stores a received message in in with the subject given, and returns its
// Message-ID.
func (f *fixture) receive(in *db.Inbox, subject string) string {
	f.n++
	id := fmt.Sprintf("<m%d@far.test>", f.n)
	m := db.NewMessage{InboxID: in.ID, MessageID: id, Direction: db.Received, From: "ann@far.test",
		To: []string{in.Address}, Subject: subject, Text: "body of " + subject, Preview: "body",
		Timestamp: time.Now(), Labels: db.InitialLabels(db.Received, false, nil),
		Raw: []byte("From: ann@far.test\r\nMessage-ID: " + id + "\r\n\r\nbody\r\n")}
	_, err := db.Deliver(f.ctx, f.store, []db.NewMessage{m})
	f.Assert(err, qt.IsNil)
	return id
}

// next waits up to 10 s for the subscription's next events.
func (f *fixture) next(s *events.Sub) []*events.Item {
	deadline := time.After(10 * time.Second)
	for {
		items, err := s.Next(f.ctx, 100)
		f.Assert(err, qt.IsNil)
		if len(items) > 0 {
			return items
		}
		select {
		case <-s.C():
		case <-deadline:
			f.Fatalf("no event")
		}
	}
}

func TestHubWakesOnlyTheAccountConcerned(t *testing.T) {
	f := newFixture(t, events.Options{})
	a := f.hub.Subscribe(db.EventFilter{AccountID: "acme"}, -1)
	defer a.Close()
	b := f.hub.Subscribe(db.EventFilter{AccountID: "bee"}, -1)
	defer b.Close()
	f.Assert(f.hub.Subscribers(), qt.Equals, 2)
	id := f.receive(f.acme, "hello")
	items := f.next(a)
	f.Assert(items, qt.HasLen, 1)
	var p map[string]any
	f.Assert(json.Unmarshal(items[0].Data, &p), qt.IsNil)
	f.Assert(p["type"], qt.Equals, db.EventReceived)
	f.Assert(p["message"].(map[string]any)["messageId"], qt.Equals, id)
	select {
	case <-b.C():
		items, err := b.Next(f.ctx, 100)
		f.Assert(err, qt.IsNil)
		f.Assert(items, qt.HasLen, 0)
	default:
	}
}

func TestHubResumesFromTheStoreBelowTheRing(t *testing.T) {
	f := newFixture(t, events.Options{RingEvents: 2, Page: 3})
	live := f.hub.Subscribe(db.EventFilter{AccountID: "acme"}, -1)
	defer live.Close()
	start := live.Cursor()
	var want []string
	for i := 0; i < 7; i++ {
		want = append(want, f.receive(f.acme, fmt.Sprintf("s%d", i)))
		f.receive(f.bz, "other account")
	}
	var got []string
	for len(got) < len(want) {
		for _, it := range f.next(live) {
			got = append(got, it.MessageID)
		}
	}
	f.Assert(got, qt.DeepEquals, want)
	// A late reader from the start reads the store, then the ring: each event once.
	late := f.hub.Subscribe(db.EventFilter{AccountID: "acme"}, start)
	defer late.Close()
	got = nil
	for len(got) < len(want) {
		for _, it := range f.next(late) {
			f.Assert(it.Data, qt.Not(qt.HasLen), 0)
			got = append(got, it.MessageID)
		}
	}
	f.Assert(got, qt.DeepEquals, want)
	items, err := late.Next(f.ctx, 100)
	f.Assert(err, qt.IsNil)
	f.Assert(items, qt.HasLen, 0)
}

func TestWait(t *testing.T) {
	f := newFixture(t, events.Options{})
	since := time.Now().Add(-time.Second)
	f.receive(f.acme, "first")
	res, err := f.hub.Wait(f.ctx, events.WaitRequest{Inbox: f.acme, Since: since, Count: 1, Timeout: time.Minute})
	f.Assert(err, qt.IsNil)
	f.Assert(res.TimedOut, qt.IsFalse)
	f.Assert(res.Messages[0].Subject, qt.Equals, "first")

	got := make(chan events.WaitResult, 1)
	go func() {
		res, err := f.hub.Wait(f.ctx, events.WaitRequest{Inbox: f.acme, Since: since, Query: "code", Count: 2, Timeout: time.Minute})
		f.Check(err, qt.IsNil)
		got <- res
	}()
	f.receive(f.acme, "your code 1")
	f.receive(f.acme, "unrelated")
	f.receive(f.acme, "your code 2")
	select {
	case res := <-got:
		f.Assert(res.TimedOut, qt.IsFalse)
		f.Assert(res.Messages, qt.HasLen, 2)
		f.Assert(res.Messages[0].Subject, qt.Equals, "your code 1")
		f.Assert(res.Messages[1].Subject, qt.Equals, "your code 2")
	case <-time.After(20 * time.Second):
		f.Fatalf("the wait did not answer")
	}

	res, err = f.hub.Wait(f.ctx, events.WaitRequest{Inbox: f.acme, Since: since, Count: 5, Timeout: 50 * time.Millisecond})
	f.Assert(err, qt.IsNil)
	f.Assert(res.TimedOut, qt.IsTrue)
	f.Assert(res.Messages, qt.HasLen, 4)
}

func TestHubRendersForLateReadersWhatNobodyStreamed(t *testing.T) {
	f := newFixture(t, events.Options{})
	start := f.hub.Last()
	waiter := make(chan error, 1)
	since := time.Now().Add(-time.Second)
	go func() { // a wait subscribes without payloads: the hub need not render for it
		_, err := f.hub.Wait(f.ctx, events.WaitRequest{Inbox: f.acme, Since: since, Count: 2, Timeout: time.Minute})
		waiter <- err
	}()
	f.receive(f.acme, "one")
	f.receive(f.acme, "two")
	f.Assert(<-waiter, qt.IsNil)
	for f.hub.Last() == start {
		time.Sleep(time.Millisecond)
	}
	late := f.hub.Subscribe(db.EventFilter{AccountID: "acme"}, start)
	defer late.Close()
	var subjects []string
	for len(subjects) < 2 {
		for _, it := range f.next(late) {
			var p map[string]any
			f.Assert(json.Unmarshal(it.Data, &p), qt.IsNil)
			subjects = append(subjects, p["message"].(map[string]any)["subject"].(string))
		}
	}
	f.Assert(subjects, qt.DeepEquals, []string{"one", "two"})
}

func TestHubTrimsRetentionByTheStoresClock(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFixtureAt(t, events.Options{TrimEvery: 10 * time.Millisecond}, clock)
	f.receive(f.acme, "old")
	mu.Lock()
	now = now.Add(db.EventRetention + time.Hour)
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, expired, err := f.store.EventBounds(f.ctx)
		f.Assert(err, qt.IsNil)
		if expired > 0 {
			break
		}
		f.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("not trimmed"))
		time.Sleep(10 * time.Millisecond)
	}
}
