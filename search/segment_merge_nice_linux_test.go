package search

import (
	"runtime"
	"syscall"
	"testing"

	qt "github.com/frankban/quicktest"
)

// threadNiceness is the calling thread's niceness (getpriority returns 20 - niceness).
func threadNiceness(t *testing.T) int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	qt.Assert(t, err, qt.IsNil)
	return 20 - p
}

func TestNicedRunsOnALowerPriorityThreadOfItsOwn(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base := threadNiceness(t)
	var got int
	niced(mergeNice, func() { got = threadNiceness(t) })
	qt.Assert(t, got, qt.Equals, min(base+mergeNice, 19))
	qt.Assert(t, threadNiceness(t), qt.Equals, base) // the caller's thread is as it was
	// The niced thread is gone with its goroutine: a new one starts from the process's
	// niceness, not from the last one's.
	niced(mergeNice, func() { got = threadNiceness(t) })
	qt.Assert(t, got, qt.Equals, min(base+mergeNice, 19))
}
