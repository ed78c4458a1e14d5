package main

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/inboxd/inboxd/search"
)

// The one place the process changes Go's runtime settings (README, "Install on a
// server": Memory, CPUs). Each is Go's default unless a measured, user-visible reason says
// otherwise, and each is left to the environment when it sets it (GOGC, GOMEMLIMIT,
// GOMAXPROCS). Only the inboxd binary applies them (main): a test that runs a command in
// its own process keeps Go's.
//
// GOGC=400 for serve and reindex: inboxd's live heap is small (10-40 MB while it ingests)
// and Go's GOGC=100 collected ~15 times a second under a stream of mail, about a tenth of
// the server's CPU; with 400 and the memory limit, the server CPU per message went from
// 1,052 to 890 us (scripts/smtpbench.sh). Indexing, likewise, allocates a lot and keeps
// little.
//
// A soft memory limit of 112 MiB for serve: it bounds the resident memory's peak under
// load (GOGC=400 alone reached 626 MB of RssAnon; scripts/bench.sh peaked at 192-196 MB
// of VmRSS with 112 MiB, 206 MB with 128 and 238 MB with 160), for ~4% of the server's
// CPU in collections while mail arrives (BENCHMARKS.md, thirteenth session). It is set
// once the search index serves: a rebuild at start holds hundreds of megabytes of batches
// at once, and under the limit it took four times as long (100,000 messages, 50 s instead
// of 13 s). `inboxd reindex` runs without it for the same reason.
//
// Two Ps per CPU for serve: a goroutine inside a SQLite call keeps its P while SQLite
// waits for the disk, and with one P per CPU each such wait idled a CPU's worth of Go
// code. On 2 CPUs (scripts/bench.sh, BENCHMARKS.md "Whole server: what limits it"):
// getMessage at 64 clients 7,624-8,542 -> 9,573-10,101 req/s, getThread 2,838-3,519 ->
// 3,783-4,324, SMTP ingest beside a search loop 1,339-1,382 -> 1,421-1,539 msg/s. Four
// per CPU measured about the same, with 30 MB more resident memory.
const (
	gcPercent   = 400
	memoryLimit = 112 << 20
	procsPerCPU = 2
)

// runtimeTuning applies the settings above when on; off, every method does nothing.
type runtimeTuning struct{ on bool }

// unset reports whether the settings apply and the environment left variable name unset.
func (rt runtimeTuning) unset(name string) bool { return rt.on && os.Getenv(name) == "" }

// serve sets serve's collector percentage and Ps per CPU; the memory limit follows once
// the index serves (limitMemoryOnceIndexed).
func (rt runtimeTuning) serve() {
	rt.collectLessOften()
	if rt.unset("GOMAXPROCS") {
		runtime.GOMAXPROCS(procsPerCPU * runtime.GOMAXPROCS(0))
	}
}

// collectLessOften sets the collector percentage of serve and reindex.
func (rt runtimeTuning) collectLessOften() {
	if rt.unset("GOGC") {
		debug.SetGCPercent(gcPercent)
	}
}

// limitMemoryOnceIndexed sets serve's soft memory limit once ix holds what the store
// held when it was called, so after any rebuild at start; it gives up when ctx ends.
func (rt runtimeTuning) limitMemoryOnceIndexed(ctx context.Context, ix *search.Indexer) {
	if !rt.unset("GOMEMLIMIT") {
		return
	}
	for ctx.Err() == nil {
		// CatchUp waits a bounded time; a rebuild of a large store takes several rounds.
		if ok, err := ix.CatchUp(ctx); ok {
			debug.SetMemoryLimit(memoryLimit)
			return
		} else if err != nil {
			select { // the store could not tell how far it is: ask again shortly
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}
