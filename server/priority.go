package server

import (
	"context"
	"runtime"
	"sync/atomic"

	"github.com/inboxd/inboxd/db"
)

// While mail is being received, searches run on OS threads of lower CPU priority than
// the rest of the server, so that when the machine's cores are all busy, mail being
// delivered gets them first: a client searching in a loop on a 2-core machine took 19-31%
// of the SMTP ingest rate at normal priority, and 5-19% on threads niced by 10, at the
// price of slower searches while mail streams in (BENCHMARKS.md, ninth session). A search
// is the most expensive read there is (an index query, then a row fetch per hit); the
// other reads stay at normal priority. When no mail is arriving, searches run where they
// were called: on those threads concurrent searches answered 20-25% fewer a second (the
// server's other threads, and the client's, preempt a niced thread whenever they wake).
//
// Go schedules goroutines on threads it picks, so the work is handed to goroutines locked
// to threads of their own, whose niceness is raised once and never lowered (Linux allows
// a process to lower its own threads' priority, not to raise it again). The API server
// owns the pool (Config.Arrivals turns it on) and stops it when it closes.
const searchNice = 10

// Arrivals counts the messages the SMTP listener is receiving at this moment (parsed,
// checked, stored). Shared with the API server (Config.Arrivals), it makes searches yield
// to them.
type Arrivals struct{ n atomic.Int64 }

// NewArrivals returns a count at zero.
func NewArrivals() *Arrivals { return &Arrivals{} }

// begin counts a message in until the returned func is called; a nil count does nothing.
func (a *Arrivals) begin() func() {
	if a == nil {
		return func() {}
	}
	a.n.Add(1)
	return func() { a.n.Add(-1) }
}

// receiving reports whether a message is being received; a nil count never is.
func (a *Arrivals) receiving() bool { return a != nil && a.n.Load() > 0 }

// lowPriority runs functions on its niced threads, first come, first served.
type lowPriority struct {
	jobs    chan func()
	quit    chan struct{} // closed by stop: the workers end, and their threads with them
	workers int
	err     error         // why the threads' priority could not be lowered; they work anyway
	ran     atomic.Uint64 // functions run (tests check searches go through the pool)
}

// newLowPriority starts the pool: one worker per P but one, so that searches waiting for
// the disk (a cold index, rows not cached) still keep the cores busy, while one reader
// connection at least (db: one per P, at least four) is never held by a niced thread that
// the kernel keeps waiting for a core. stop ends it.
func newLowPriority() *lowPriority {
	p := &lowPriority{jobs: make(chan func()), quit: make(chan struct{}), workers: max(1, runtime.GOMAXPROCS(0)-1)}
	started := make(chan error, p.workers)
	for range p.workers {
		go p.work(started)
	}
	for range p.workers {
		if err := <-started; err != nil {
			p.err = err
		}
	}
	return p
}

// work runs jobs on a thread of its own until stop. The thread is never unlocked: it
// keeps its niceness for good, and ends with the goroutine.
func (p *lowPriority) work(started chan<- error) {
	runtime.LockOSThread()
	started <- lowerThreadPriority(searchNice)
	for {
		select {
		case job := <-p.jobs:
			job()
		case <-p.quit:
			return
		}
	}
}

// stop ends the workers once their jobs are done; do answers unavailable from then on.
func (p *lowPriority) stop() { close(p.quit) }

// do runs f on one of the pool's threads and returns its error. It waits for a free
// thread until ctx ends (then it answers unavailable, transient); once f has started it
// waits for f to finish, so f may use the caller's request and response. A panic in f is
// raised again in the caller.
func (p *lowPriority) do(ctx context.Context, f func() error) error {
	type outcome struct {
		err      error
		panicked bool
		value    any
	}
	done := make(chan outcome, 1)
	job := func() {
		var o outcome
		defer func() {
			if v := recover(); v != nil {
				o = outcome{panicked: true, value: v}
			}
			done <- o
		}()
		o.err = f()
	}
	stopping := &db.Error{Code: db.ECodeUnavailable, Message: "the server is stopping", Transient: true}
	select {
	case <-p.quit: // first: a worker may still be free to take the job
		return stopping
	default:
	}
	select {
	case p.jobs <- job:
	case <-ctx.Done():
		return &db.Error{Code: db.ECodeUnavailable, Message: "the request ended while it waited for a search thread",
			Transient: true, Cause: ctx.Err()}
	case <-p.quit:
		return stopping
	}
	o := <-done
	p.ran.Add(1)
	if o.panicked {
		panic(o.value)
	}
	return o.err
}
