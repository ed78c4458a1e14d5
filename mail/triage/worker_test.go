package triage_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail/triage"
)

// clock is a test clock that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fake is a provider whose answers the test chooses; it records when it was called.
type fake struct {
	mu     sync.Mutex
	clock  *clock
	calls  []time.Time
	answer func(n int, in triage.Input) (triage.Scores, error)
}

func (f *fake) Model() string { return "fake-1" }

func (f *fake) Inline() func(*db.NewMessage, time.Time) *db.Triage { return nil }

func (f *fake) Analyze(ctx context.Context, in triage.Input) (triage.Scores, error) {
	f.mu.Lock()
	f.calls = append(f.calls, f.clock.Now())
	n := len(f.calls)
	f.mu.Unlock()
	return f.answer(n, in)
}

func (f *fake) Calls() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

var billingHigh = triage.Scores{Category: [6]float64{0.9, 0.02, 0.02, 0.02, 0.02, 0.02}, NeedsReply: 0.9, Urgency: [4]float64{0, 0.1, 0.8, 0.1}}

type env struct {
	c     *qt.C
	store db.Store
	path  string
	clock *clock
	inbox int64
}

func newEnv(c *qt.C, plan string) *env {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)}
	path := filepath.Join(c.TempDir(), "inboxd.db")
	store, err := sqlite.Open(ctx, path, sqlite.Options{Now: clk.Now})
	c.Assert(err, qt.IsNil)
	c.Cleanup(func() { store.Close() })
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "acme", Plan: plan}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, store, db.NewInbox{AccountID: "acme", Address: "desk@inboxd.test", DefaultDomain: "inboxd.test"})
	c.Assert(err, qt.IsNil)
	return &env{c: c, store: store, path: path, clock: clk, inbox: in.ID}
}

// receive stores a message as live mail arrives: triage pending, queued.
func (e *env) receive(id string, quarantined bool) {
	e.receiveWith(id, quarantined, db.TriageSignals{})
}

// receiveWith is receive for a message with what mail knew of it besides its words.
func (e *env) receiveWith(id string, quarantined bool, sig db.TriageSignals) {
	m := db.NewMessage{TriageSignals: sig, InboxID: e.inbox, MessageID: id, Direction: db.Received, From: "ann@example.com", To: []string{"desk@inboxd.test"},
		Subject: "Invoice " + id, Text: "Please find the invoice attached.", Timestamp: e.clock.Now(),
		Labels: db.InitialLabels(db.Received, quarantined, nil), Triage: &db.Triage{Status: db.TriagePending}, QueueTriage: true}
	if quarantined {
		m.Protection = &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: "2026-11-03T09:00:00.000Z", Reasons: []string{"spam"},
			Antivirus: db.Antivirus{Status: "clean", Signatures: []string{}}, Authentication: db.Authentication{SPF: "none", DKIM: "none", DMARC: "none", SigningDomains: []string{}},
			Spam: db.Spam{Score: 9, Threshold: 6}}
	}
	_, err := db.Deliver(context.Background(), e.store, []db.NewMessage{m})
	e.c.Assert(err, qt.IsNil)
}

func (e *env) triageOf(id string) *db.Triage {
	m, err := e.store.GetMessage(context.Background(), e.inbox, id)
	e.c.Assert(err, qt.IsNil)
	return m.Triage
}

func (e *env) used() int64 {
	u, err := e.store.GetUsage(context.Background(), "acme")
	e.c.Assert(err, qt.IsNil)
	for _, f := range u.Features {
		if f.Feature == db.FeatureTriage {
			return f.Used
		}
	}
	return -1
}

// run starts a worker; the returned function stops it and waits for it.
func (e *env) run(p triage.Provider) func() {
	ctx, cancel := context.WithCancel(context.Background())
	w := &triage.Worker{Store: e.store, Provider: p, Poll: 2 * time.Millisecond, Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	e.c.Cleanup(stop)
	return sync.OnceFunc(stop)
}

func (e *env) eventually(what string, cond func() bool) {
	e.c.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.c.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (e *env) status(id string) func() bool {
	return func() bool { t := e.triageOf(id); return t != nil && t.Status != db.TriagePending }
}

func (e *env) queueLen() int64 {
	n, err := e.store.TriageQueueLen(context.Background())
	e.c.Assert(err, qt.IsNil)
	return n
}

// TestWorkerSeesSignals: a message analyzed from the queue reaches the provider with the
// header fields and thread position it arrived with, as one analyzed on arrival does.
func TestWorkerSeesSignals(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "free")
	e.receiveWith("<a@x>", false, db.TriageSignals{Headers: map[string]string{"List-Id": "<deals.shop.example>", "X-Other": "dropped"},
		RepliesToOurs: true})
	got := make(chan triage.Input, 1)
	e.run(&fake{clock: e.clock, answer: func(_ int, in triage.Input) (triage.Scores, error) { got <- in; return billingHigh, nil }})
	in := <-got
	c.Assert(in.Headers, qt.DeepEquals, map[string]string{"List-Id": "<deals.shop.example>"})
	c.Assert(in.RepliesToOurs, qt.IsTrue)
}

// TestWorkerCompletes: a queued message gets a complete result with the spec's shape, its
// filter columns match, one triage unit is spent, and the queue is empty.
func TestWorkerCompletes(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "free")
	e.receive("<a@x>", false)
	c.Assert(e.triageOf("<a@x>"), qt.DeepEquals, &db.Triage{Status: db.TriagePending})
	e.run(&fake{clock: e.clock, answer: func(int, triage.Input) (triage.Scores, error) { return billingHigh, nil }})
	e.eventually("complete", e.status("<a@x>"))
	tr := e.triageOf("<a@x>")
	c.Assert(tr.Status, qt.Equals, db.TriageComplete)
	c.Assert(tr.Model, qt.Equals, "fake-1")
	c.Assert(tr.AnalyzedAt, qt.Equals, "2026-11-03T09:00:00.000Z")
	c.Assert(tr.Category.Value, qt.Equals, "billing")
	c.Assert(*tr.NeedsReply.Value, qt.IsTrue)
	c.Assert(*tr.Urgency.Value, qt.Equals, "high")
	c.Assert(e.used(), qt.Equals, int64(1))
	c.Assert(e.queueLen(), qt.Equals, int64(0))
	for _, f := range []db.MessageFilter{{Category: "billing"}, {NeedsReply: "yes"}, {Urgency: "high"}, {Category: "billing", NeedsReply: "yes", Urgency: "high"}} {
		msgs, _, err := e.store.ListMessages(context.Background(), e.inbox, f, 10, "")
		c.Assert(err, qt.IsNil)
		c.Assert(msgs, qt.HasLen, 1, qt.Commentf("%+v", f))
	}
	for _, f := range []db.MessageFilter{{Category: "sales"}, {NeedsReply: "uncertain"}, {Urgency: "low"}} {
		msgs, _, err := e.store.ListMessages(context.Background(), e.inbox, f, 10, "")
		c.Assert(err, qt.IsNil)
		c.Assert(msgs, qt.HasLen, 0, qt.Commentf("%+v", f))
	}
}

// TestWorkerRetries: an unavailable provider is tried five times, 30 s, 60 s, 120 s and
// 240 s apart, then the triage fails with provider_unavailable and the unit is refunded.
func TestWorkerRetries(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "developer")
	e.receive("<a@x>", false)
	f := &fake{clock: e.clock, answer: func(int, triage.Input) (triage.Scores, error) {
		return triage.Scores{}, &triage.Error{Code: triage.CodeUnavailable, Retry: true, Err: errors.New("503")}
	}}
	e.run(f)
	for n := 1; n <= triage.MaxAttempts; n++ {
		e.eventually("attempt", func() bool { return len(f.Calls()) >= n })
		if n < triage.MaxAttempts {
			c.Assert(e.triageOf("<a@x>").Status, qt.Equals, db.TriagePending)
			c.Assert(e.used(), qt.Equals, int64(1)) // charged once, when the analysis started
			e.clock.Advance(time.Second)            // not due yet: nothing happens
			time.Sleep(20 * time.Millisecond)
			c.Assert(f.Calls(), qt.HasLen, n)
			e.clock.Advance(time.Hour)
		}
	}
	e.eventually("failed", e.status("<a@x>"))
	calls := f.Calls()
	c.Assert(calls, qt.HasLen, triage.MaxAttempts)
	// Each wait is the backoff: the second attempt came due 30 s after the first failed
	// (the test clock jumped past it), and so on; the schedule is in the queue.
	tr := e.triageOf("<a@x>")
	c.Assert(tr, qt.DeepEquals, &db.Triage{Status: db.TriageFailed, Code: "provider_unavailable", FailedAt: db.Time{Time: calls[4]}.String()})
	c.Assert(e.used(), qt.Equals, int64(0))
	c.Assert(e.queueLen(), qt.Equals, int64(0))
	msgs, _, err := e.store.ListMessages(context.Background(), e.inbox, db.MessageFilter{NeedsReply: "uncertain"}, 10, "")
	c.Assert(err, qt.IsNil)
	c.Assert(msgs, qt.HasLen, 0) // failed triage matches no filter
}

// TestBackoff pins the retry schedule: doubling from 30 s, Retry-After can only extend it,
// and no wait exceeds an hour.
func TestBackoff(t *testing.T) {
	c := qt.New(t)
	c.Assert(triage.Backoff(1, 0), qt.Equals, 30*time.Second)
	c.Assert(triage.Backoff(2, 0), qt.Equals, time.Minute)
	c.Assert(triage.Backoff(3, 0), qt.Equals, 2*time.Minute)
	c.Assert(triage.Backoff(4, 0), qt.Equals, 4*time.Minute)
	c.Assert(triage.Backoff(1, 10*time.Second), qt.Equals, 30*time.Second)
	c.Assert(triage.Backoff(1, 10*time.Minute), qt.Equals, 10*time.Minute)
	c.Assert(triage.Backoff(2, 5*time.Hour), qt.Equals, time.Hour)
	c.Assert(triage.Backoff(12, 0), qt.Equals, time.Hour)
}

// TestWorkerRetryAfter: a provider's Retry-After pushes the next attempt back.
func TestWorkerRetryAfter(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "developer")
	e.receive("<a@x>", false)
	f := &fake{clock: e.clock, answer: func(n int, _ triage.Input) (triage.Scores, error) {
		if n == 1 {
			return triage.Scores{}, &triage.Error{Code: triage.CodeUnavailable, Retry: true, RetryAfter: 10 * time.Minute, Err: errors.New("429")}
		}
		return billingHigh, nil
	}}
	e.run(f)
	e.eventually("first attempt", func() bool { return len(f.Calls()) == 1 })
	e.clock.Advance(9 * time.Minute) // past the 30 s backoff, not past Retry-After
	time.Sleep(20 * time.Millisecond)
	c.Assert(f.Calls(), qt.HasLen, 1)
	e.clock.Advance(time.Minute)
	e.eventually("complete", e.status("<a@x>"))
	c.Assert(e.triageOf("<a@x>").Status, qt.Equals, db.TriageComplete)
	c.Assert(e.used(), qt.Equals, int64(1))
}

// TestWorkerRejected: a rejection or an invalid answer fails at once, refunded.
func TestWorkerRejected(t *testing.T) {
	for _, code := range []string{triage.CodeRejected, triage.CodeInvalidResponse} {
		t.Run(code, func(t *testing.T) {
			c := qt.New(t)
			e := newEnv(c, "free")
			e.receive("<a@x>", false)
			f := &fake{clock: e.clock, answer: func(int, triage.Input) (triage.Scores, error) {
				return triage.Scores{}, &triage.Error{Code: code, Err: errors.New("no")}
			}}
			e.run(f)
			e.eventually("failed", e.status("<a@x>"))
			c.Assert(e.triageOf("<a@x>"), qt.DeepEquals, &db.Triage{Status: db.TriageFailed, Code: code, FailedAt: "2026-11-03T09:00:00.000Z"})
			c.Assert(f.Calls(), qt.HasLen, 1)
			c.Assert(e.used(), qt.Equals, int64(0))
		})
	}
}

// TestWorkerAllowanceSpent: with the monthly triage allowance spent, a message is not
// analyzed and its triage disappears (absent, not failed).
func TestWorkerAllowanceSpent(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "free")
	c.Assert(e.store.SetUsage(context.Background(), "acme", db.FeatureTriage, 500), qt.IsNil)
	e.receive("<a@x>", false)
	f := &fake{clock: e.clock, answer: func(int, triage.Input) (triage.Scores, error) { return billingHigh, nil }}
	e.run(f)
	e.eventually("dequeued", func() bool { return e.queueLen() == 0 })
	c.Assert(e.triageOf("<a@x>"), qt.IsNil)
	c.Assert(f.Calls(), qt.HasLen, 0)
	c.Assert(e.used(), qt.Equals, int64(500))
}

// TestWorkerQuarantine: a quarantined message waits, uncharged, until a person releases it.
func TestWorkerQuarantine(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "free")
	e.receive("<q@x>", true)
	f := &fake{clock: e.clock, answer: func(int, triage.Input) (triage.Scores, error) { return billingHigh, nil }}
	e.run(f)
	time.Sleep(30 * time.Millisecond)
	c.Assert(f.Calls(), qt.HasLen, 0)
	c.Assert(e.used(), qt.Equals, int64(0))
	c.Assert(e.queueLen(), qt.Equals, int64(1))
	msg, err := e.store.GetMessage(context.Background(), e.inbox, "<q@x>")
	c.Assert(err, qt.IsNil)
	ok, err := db.ReleaseMessage(context.Background(), e.store, msg.UUID, db.Actor{Name: "reviewer"})
	c.Assert(err, qt.IsNil)
	c.Assert(ok, qt.IsTrue)
	e.eventually("complete after release", e.status("<q@x>"))
	c.Assert(e.triageOf("<q@x>").Status, qt.Equals, db.TriageComplete)
	c.Assert(e.used(), qt.Equals, int64(1))
}

// TestWorkerResumes: an analysis cut short by shutdown stays queued, and the next start
// finishes it without charging the unit again; a fixture's pending triage is left alone.
func TestWorkerResumes(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "free")
	e.receive("<a@x>", false)
	fixture := db.NewMessage{InboxID: e.inbox, MessageID: "<fixture@x>", Direction: db.Received, From: "b@example.com", Subject: "s", Text: "t",
		Timestamp: e.clock.Now(), Labels: db.InitialLabels(db.Received, false, nil), Triage: &db.Triage{Status: db.TriagePending}}
	_, err := db.Deliver(context.Background(), e.store, []db.NewMessage{fixture})
	c.Assert(err, qt.IsNil)

	started := make(chan struct{}, 1)
	blocking := &blockingProvider{started: started}
	stop := e.run(blocking)
	<-started
	stop()
	c.Assert(e.triageOf("<a@x>").Status, qt.Equals, db.TriagePending)
	c.Assert(e.used(), qt.Equals, int64(1))
	c.Assert(e.store.Close(), qt.IsNil)

	store, err := sqlite.Open(context.Background(), e.path, sqlite.Options{Now: e.clock.Now})
	c.Assert(err, qt.IsNil)
	c.Cleanup(func() { store.Close() })
	e.store = store
	e.run(&fake{clock: e.clock, answer: func(int, triage.Input) (triage.Scores, error) { return billingHigh, nil }})
	e.eventually("complete after restart", e.status("<a@x>"))
	c.Assert(e.used(), qt.Equals, int64(1))
	c.Assert(e.queueLen(), qt.Equals, int64(0))
	c.Assert(e.triageOf("<fixture@x>"), qt.DeepEquals, &db.Triage{Status: db.TriagePending})
}

type blockingProvider struct{ started chan struct{} }

func (b *blockingProvider) Model() string { return "blocking" }

func (b *blockingProvider) Inline() func(*db.NewMessage, time.Time) *db.Triage { return nil }

func (b *blockingProvider) Analyze(ctx context.Context, _ triage.Input) (triage.Scores, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return triage.Scores{}, ctx.Err()
}

// TestWorkerBuiltinTruncated runs the real built-in model over a message longer than the
// model reads: bodyTruncated is set, and the input the provider saw was cut.
func TestWorkerBuiltinTruncated(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "developer")
	b, err := triage.NewBuiltin()
	c.Assert(err, qt.IsNil)
	long := db.NewMessage{InboxID: e.inbox, MessageID: "<long@x>", Direction: db.Received, From: "ops@example.com", Subject: "Logs",
		Text: repeat("ERROR timeout after 30s\n", 2000), Timestamp: e.clock.Now(),
		Labels: db.InitialLabels(db.Received, false, nil), Triage: &db.Triage{Status: db.TriagePending}, QueueTriage: true}
	_, err = db.Deliver(context.Background(), e.store, []db.NewMessage{long})
	c.Assert(err, qt.IsNil)
	e.receive("<short@x>", false)
	e.run(b)
	e.eventually("complete", func() bool { return e.status("<long@x>")() && e.status("<short@x>")() })
	tr := e.triageOf("<long@x>")
	c.Assert(tr.Status, qt.Equals, db.TriageComplete)
	c.Assert(tr.Model, qt.Equals, triage.ModelName)
	c.Assert(*tr.BodyTruncated, qt.IsTrue)
	c.Assert(*e.triageOf("<short@x>").BodyTruncated, qt.IsFalse)
}

func repeat(s string, n int) string {
	b := make([]byte, 0, len(s)*n)
	for i := 0; i < n; i++ {
		b = append(b, s...)
	}
	return string(b)
}

// leasing is a store whose claims carry a lease (db.TriageJob.LeaseEnds), as a store
// shared by several processes gives them (db/postgres): past its end another process may
// claim the message. It records the lease of each message's latest claim, by subject.
type leasing struct {
	db.Store
	clock *clock
	lease time.Duration
	mu    sync.Mutex
	ends  map[string]time.Time
}

func (l *leasing) TriageTexts(ctx context.Context, jobs []db.TriageJob) ([]db.TriageJob, error) {
	out, err := l.Store.TriageTexts(ctx, jobs)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range out {
		out[i].LeaseEnds = l.clock.Now().Add(l.lease)
		l.ends[out[i].Subject] = out[i].LeaseEnds
	}
	return out, err
}

func (l *leasing) leaseOf(subject string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ends[subject]
}

// TestWorkerAnalyzesWithinLeases: a claimed message that waited for a free analyzer until
// its lease (nearly) ended is not analyzed on that claim, which another process may have
// taken over by then: it is claimed again, and analyzed once, within its new lease. (A slow
// endpoint and more messages claimed than analyzers would otherwise have two processes
// analyze one message.)
func TestWorkerAnalyzesWithinLeases(t *testing.T) {
	c := qt.New(t)
	e := newEnv(c, "free")
	for _, id := range []string{"<a@x>", "<b@x>", "<c@x>"} {
		e.receive(id, false)
	}
	const lease = time.Minute
	l := &leasing{Store: e.store, clock: e.clock, lease: lease, ends: map[string]time.Time{}}
	release := make(chan struct{})
	var mu sync.Mutex
	var late []string // analyses started past their lease's end, less what storing needs
	calls := map[string]int{}
	p := &fake{clock: e.clock, answer: func(n int, in triage.Input) (triage.Scores, error) {
		mu.Lock()
		calls[in.Subject]++
		if !e.clock.Now().Before(l.leaseOf(in.Subject).Add(-triage.LeaseMargin)) {
			late = append(late, in.Subject)
		}
		mu.Unlock()
		if n == 1 {
			<-release // the first holds the only analyzer while the others wait
		}
		return billingHigh, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	w := &triage.Worker{Store: l, Provider: p, Workers: 1, Batch: 3, Poll: 2 * time.Millisecond, Now: e.clock.Now,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	e.eventually("the first analysis", func() bool { return len(p.Calls()) == 1 })
	e.clock.Advance(lease) // the waiting claims' leases end
	close(release)
	for _, id := range []string{"<a@x>", "<b@x>", "<c@x>"} {
		e.eventually("complete "+id, e.status(id))
		c.Assert(e.triageOf(id).Status, qt.Equals, db.TriageComplete)
	}
	mu.Lock()
	defer mu.Unlock()
	c.Assert(late, qt.HasLen, 0)
	c.Assert(calls, qt.DeepEquals, map[string]int{"Invoice <a@x>": 1, "Invoice <b@x>": 1, "Invoice <c@x>": 1})
	c.Assert(e.used(), qt.Equals, int64(3))
}
