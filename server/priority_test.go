package server

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// threadNice reads the calling thread's niceness from /proc (field 19 of its stat line),
// independently of the getpriority convention search.LowerThreadPriority works with.
func threadNice(t *testing.T) int {
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatalf("reading the thread's niceness: %v", err)
	}
	// The command name, in parentheses, may hold spaces: count fields after it.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	n, err := strconv.Atoi(fields[16]) // field 19 of the line is the 17th after the name
	if err != nil {
		t.Fatalf("niceness %q: %v", fields[16], err)
	}
	return n
}

// startLowPriority starts a pool of search threads, stopped when the test ends.
func startLowPriority(t *testing.T) *lowPriority {
	p := newLowPriority()
	t.Cleanup(p.stop)
	return p
}

func TestLowPriorityRunsOnNicedThreads(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("per-thread niceness is Linux's")
	}
	p := startLowPriority(t)
	qt.Assert(t, p.err, qt.IsNil)
	runtime.LockOSThread()
	base := threadNice(t)
	runtime.UnlockOSThread()
	for range 2 * p.workers { // each worker, most likely
		var got int
		qt.Assert(t, p.do(context.Background(), func() error { got = threadNice(t); return nil }), qt.IsNil)
		qt.Assert(t, got, qt.Equals, min(base+searchNice, 19))
	}
}

func TestLowPriorityReturnsErrorsAndPanics(t *testing.T) {
	p := startLowPriority(t)
	boom := errors.New("boom")
	qt.Assert(t, p.do(context.Background(), func() error { return boom }), qt.Equals, boom)
	qt.Assert(t, func() { p.do(context.Background(), func() error { panic("search broke") }) }, qt.PanicMatches, "search broke")
	// The worker survived the panic.
	for range p.workers {
		qt.Assert(t, p.do(context.Background(), func() error { return nil }), qt.IsNil)
	}
}

func TestLowPriorityGivesUpWaitingWhenTheRequestEnds(t *testing.T) {
	p := startLowPriority(t)
	release := make(chan struct{})
	busy := make(chan struct{}, p.workers)
	for range p.workers {
		go p.do(context.Background(), func() error { busy <- struct{}{}; <-release; return nil })
	}
	for range p.workers {
		<-busy
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ran := false
	err := p.do(ctx, func() error { ran = true; return nil })
	qt.Assert(t, err, qt.ErrorIs, context.DeadlineExceeded)
	qt.Assert(t, db.IsCode(err, db.ECodeUnavailable), qt.IsTrue)
	close(release)
	qt.Assert(t, p.do(context.Background(), func() error { return nil }), qt.IsNil)
	qt.Assert(t, ran, qt.IsFalse)
}

// Once the server has stopped its search threads, a search that still asks for one is
// told the server is stopping rather than wait forever.
func TestLowPriorityAfterStop(t *testing.T) {
	p := newLowPriority()
	p.stop()
	err := p.do(context.Background(), func() error { t.Error("ran after stop"); return nil })
	qt.Assert(t, db.IsCode(err, db.ECodeUnavailable), qt.IsTrue)
}
