package webhook

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/events"
)

// Defaults of Config (extensions section 3).
const (
	DefaultTimeout     = 10 * time.Second
	DefaultPerWebhook  = 4
	DefaultMaxInFlight = 64
	DefaultWindow      = 24 * time.Hour
	// DefaultPoll is the longest the worker sleeps: deliveries another process queued
	// wake no channel here.
	DefaultPoll = 30 * time.Second
	// finishTimeout bounds recording an attempt, which outlives a stop.
	finishTimeout = 10 * time.Second
	// busyRecheck is how soon the worker looks again when a due delivery waits for a
	// slot of its webhook.
	busyRecheck = time.Second
	// claimGather is the least time between two claims that a commit or an attempt's end
	// wakes: while mail flows, one claim (a read, a write, a read of the messages) takes
	// the deliveries of several commits instead of one each.
	claimGather = 10 * time.Millisecond
)

// Config configures a Worker; zero fields take the defaults.
type Config struct {
	Store db.Store
	Log   *slog.Logger
	// Timeout is how long an attempt may take, answer included.
	Timeout time.Duration
	// PerWebhook bounds the attempts in flight to one webhook, MaxInFlight all of them.
	PerWebhook, MaxInFlight int
	// Lease is how long a claimed delivery stays the worker's (longer than Timeout); a
	// worker that dies leaves it to be claimed again after that.
	Lease time.Duration
	// Backoff is the wait after failed attempt n (1, 2, ...); nil is Backoff.
	Backoff func(attempt int) time.Duration
	// Window is how long after its event a delivery is retried; then it is failed.
	Window time.Duration
	Poll   time.Duration
	// Clock, when set, is the clock Store reads (the test controls move it): the worker
	// wakes when it moves, so a retry it skipped past is made at once.
	Clock *db.Clock
	// Transport carries the requests; nil is a transport of the worker's own.
	Transport http.RoundTripper
	// Payloads renders the events to post; nil renders them from Store. The process's
	// events.Hub is one that shares what it rendered for the streams.
	Payloads Payloads
}

// Payloads renders events as webhooks and streams carry them (db.Event.Payload), one
// payload for each event, in order.
type Payloads interface {
	Payloads(ctx context.Context, evs []db.Event) ([][]byte, error)
}

// Backoff is the contract's retry schedule: min(3600, 5 x 2^(n-1)) seconds after failed
// attempt n, give or take 10%, so endpoints that failed together are not retried
// together.
func Backoff(attempt int) time.Duration {
	s := math.Min(3600, 5*math.Pow(2, float64(attempt-1)))
	return time.Duration(s * (0.9 + 0.2*rand.Float64()) * float64(time.Second))
}

// Counts are the attempts a Worker has recorded, by outcome.
type Counts struct {
	Delivered uint64 // 2xx in time
	Retried   uint64 // failed, to be retried
	Failed    uint64 // failed for good: the window is over
}

// Worker delivers the queued webhook deliveries.
type Worker struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	busy     map[int64]int   // attempts in flight by webhook row
	waiting  map[int64][]job // claimed deliveries waiting for a slot, by webhook row, oldest first
	inflight int
	held     int           // claimed and not finished: in flight or waiting
	freed    chan struct{} // something may be claimable: a webhook holds few enough, or an attempt was recorded
	// reserved counts the deliveries the store is queueing leased to this worker (Reserve),
	// by webhook row, and reservedAll all of them: they count as held.
	reserved    map[int64]int
	reservedAll int
	run         *running // the Run in progress, nil when none
	// due: deliveries this worker was not handed may be due, so the next wake claims
	// (with the store's offers; without them every wake claims). backlog: the worker had
	// no room for a delivery queued since its last claim that found nothing. afterRefusal is
	// closed by the commit of the last unit of work that queued a delivery unleased (Reserve
	// refused it, or the store missed it): it is claimable only from then on.
	due, backlog bool
	afterRefusal <-chan struct{}

	recMu      sync.Mutex
	unrecorded []unrecorded // attempts made, waiting for the write that records them
	recording  bool         // a goroutine is recording them (recordAll)

	delivered, retried, failed atomic.Uint64
}

// New returns a worker; Run starts it.
func New(cfg Config) *Worker {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.Window = orDefault(cfg.Window, DefaultWindow)
	cfg.Poll = orDefault(cfg.Poll, DefaultPoll)
	if cfg.Lease <= cfg.Timeout { // else an attempt could outlive its lease and be made twice at once
		cfg.Lease = cfg.Timeout + time.Minute
	}
	cfg.PerWebhook = orDefault(cfg.PerWebhook, DefaultPerWebhook)
	cfg.MaxInFlight = orDefault(cfg.MaxInFlight, DefaultMaxInFlight)
	if cfg.Backoff == nil {
		cfg.Backoff = Backoff
	}
	if cfg.Payloads == nil {
		cfg.Payloads = events.StorePayloads{Store: cfg.Store}
	}
	if cfg.Transport == nil {
		cfg.Transport = newTransport(cfg.PerWebhook)
	}
	client := &http.Client{Transport: cfg.Transport,
		// A redirect is the endpoint's answer, a failed attempt: following it would send
		// the signed event somewhere the account never named.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Worker{cfg: cfg, client: client, busy: map[int64]int{}, waiting: map[int64][]job{}, reserved: map[int64]int{},
		freed: make(chan struct{}, 1)}
}

// running is what the attempts of a Run share.
type running struct {
	ctx      context.Context
	attempts *sync.WaitGroup
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Counts returns what the worker has recorded so far; zero for a nil worker.
func (w *Worker) Counts() Counts {
	if w == nil {
		return Counts{}
	}
	return Counts{Delivered: w.delivered.Load(), Retried: w.retried.Load(), Failed: w.failed.Load()}
}

// Run delivers until ctx ends, then waits for the attempts in flight, which the end of
// ctx cuts short: those are recorded nowhere and given back, due again at once (or when
// their leases end, when the store could not be told).
//
// The store hands the worker the deliveries its units of work queue, leased to it at
// once, as far as it has room (Reserve, Take; db.Webhooks.OfferHookDeliveries); Run
// claims the others: retries when they come due, what it had no room for, what a worker
// that stopped or died left. With a store that offers nothing, Run claims after every
// commit of events; with one that offers, a commit wakes it only when it had no room for
// a delivery the commit queued.
func (w *Worker) Run(ctx context.Context) {
	var attempts sync.WaitGroup
	defer attempts.Wait()
	w.setRunning(&running{ctx: ctx, attempts: &attempts})
	stopOffers, offered := w.cfg.Store.OfferHookDeliveries(w)
	defer func() {
		stopOffers()
		w.setRunning(nil) // what the store hands over from now on is given back
	}()
	var lookAt time.Time // when to look at the queue again, unless woken
	for ctx.Err() == nil {
		// Taken before claiming, so that no commit is missed. With offers, only a commit
		// that queued what the worker had no room for matters (Reserve).
		wake := w.refusalCommit()
		if !offered {
			wake = w.cfg.Store.EventsCommitted()
		}
		var moved <-chan struct{} // nil without a Clock: never
		if w.cfg.Clock != nil {
			moved = w.cfg.Clock.Moved()
		}
		claimed := time.Now()
		if !offered || w.takeDue() {
			if w.claim(ctx, &attempts) {
				w.markDue() // there may be more
				continue
			}
			lookAt = time.Now().Add(w.nextWait(ctx))
		}
		t := time.NewTimer(time.Until(lookAt))
		select {
		case <-ctx.Done():
		case <-wake:
			pause(ctx, claimGather-time.Since(claimed))
			w.refusalCommitted(wake)
		case <-w.freed:
			pause(ctx, claimGather-time.Since(claimed))
		case <-t.C:
			w.markDue()
		case <-moved:
		}
		t.Stop()
		if fired(moved) { // whichever case select took: the clock's move is not lost
			w.markDue()
		}
	}
}

// setRunning notes the Run in progress (nil: none).
func (w *Worker) setRunning(r *running) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.run, w.due = r, true // a Run starts with a claim
}

// refusalCommit returns the channel the commit of the last refusal closes (nil: none).
func (w *Worker) refusalCommit() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.afterRefusal
}

// refusalCommitted notes that the commit ch stood for has come: the next wake claims.
func (w *Worker) refusalCommitted(ch <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch != nil && w.afterRefusal == ch {
		w.afterRefusal = nil
	}
	w.due = true
}

// markDue has the next wake claim.
func (w *Worker) markDue() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.due = true
}

// takeDue reports whether the worker should claim now, and clears it.
func (w *Worker) takeDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	due := w.due
	w.due = false
	return due
}

// fired reports whether ch is closed (a nil ch never is).
func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pause waits d (nothing when d <= 0) or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
}

// nextWait is how long to sleep: until the next delivery comes due, at most Poll; a
// little when one is due already but waits for a slot of its webhook, or while the
// worker holds deliveries (the end of their attempts wakes it: the store is asked only
// when nothing is held, so a busy worker does not scan the queue after every claim).
func (w *Worker) nextWait(ctx context.Context) time.Duration {
	w.mu.Lock()
	held := w.held
	w.mu.Unlock()
	if held > 0 {
		return min(busyRecheck, w.cfg.Poll)
	}
	at, ok, err := w.cfg.Store.NextHookDue(ctx)
	if err != nil {
		w.cfg.Log.Error("webhooks: next due delivery", "err", err)
		return busyRecheck
	}
	if !ok {
		return w.cfg.Poll
	}
	d := at.Sub(w.cfg.Store.Now())
	switch {
	case d <= 0:
		return min(busyRecheck, w.cfg.Poll)
	case d > w.cfg.Poll:
		return w.cfg.Poll
	}
	return d
}
