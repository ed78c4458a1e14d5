package search

import (
	"runtime"
	"sync/atomic"
)

// mergeNice is how much lower than the rest of the process merges run (on Linux: the
// niceness of their threads). Merging segments is background work; what arriving mail
// waits for (the SMTP session, parsing, the checks, the commit before the 250) is not, and
// when the cores are all busy it gets them first. The planner starts a merge whenever mail
// has added enough segments, and merging costs about what building the segments did (a
// CPU profile of SMTP ingest: 13% merging, 12% building), so at normal priority merges
// took their share in the middle of SMTP bursts. On the 2-CPU benchmark machine, SMTP
// ingest on the bench's kept database (scripts/smtpbench -from ... -search-loop, five
// pairs in turns) averaged 2,194 msg/s alone with niced merges against 2,107, and 1,670
// beside a search loop against 1,592; the runs' spread is wider than that (BENCHMARKS.md,
// fourteenth session). A niced merge still gets any core nothing else wants, and a share
// of a busy one (about a tenth against a thread at normal priority), so under a flood
// lasting minutes merges fall behind and a search visits more segments until they catch
// up.
const mergeNice = 10

// nicedRuns counts the functions niced ran (tests check merges go through it).
var nicedRuns atomic.Uint64

// niced runs f on a thread of its own whose priority is lowered by nice, and waits for it.
// Where the priority cannot be lowered (not Linux) f runs all the same, at normal priority.
// A panic in f is raised again in the caller: scorch's merger recovers its panics and
// reports them as the index's asynchronous errors, and one on another goroutine would end
// the process instead.
func niced(nice int, f func()) {
	var panicked any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		// Never unlocked: the thread ends with this goroutine, and its niceness with it.
		runtime.LockOSThread()
		_ = LowerThreadPriority(nice)
		nicedRuns.Add(1)
		f()
	}()
	<-done
	if panicked != nil {
		panic(panicked)
	}
}
