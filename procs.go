package main

import (
	"os"
	"runtime"
)

// procsPerCPU is how many Ps (goroutines running Go code at once) `inboxd serve` keeps
// per CPU Go would use, unless GOMAXPROCS is set.
//
// Why more Ps than CPUs: a goroutine inside a SQLite call (cgo) keeps its P while SQLite
// waits for the disk (a reader's page that is not in the page cache, the writer's WAL
// writes and checkpoint fsyncs), until the runtime's monitor notices and hands the P to
// another thread; with one P per CPU each such wait idles a CPU's worth of Go code. With
// two per CPU the kernel shares the cores among the threads that can run instead.
// Measured with scripts/bench.sh on 2 CPUs, in turns (BENCHMARKS.md, "Whole server: what
// limits it"): getMessage at 64 clients 7,624-8,542 -> 9,573-10,101 req/s, getThread at 64
// 2,838-3,519 -> 3,783-4,324, SMTP ingest beside a search loop 1,339-1,382 -> 1,421-1,539
// msg/s; on a cold page cache getMessage went from 5,347 to 7,798 req/s. Four per CPU
// (with sixteen readers) measured about the same, with 30 MB more resident memory.
const procsPerCPU = 2

// tuneProcs sets the server's GOMAXPROCS, and leaves what the environment chose. Other
// commands keep Go's default: a rebuild of the index sizes its workers by GOMAXPROCS.
func tuneProcs() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(procsPerCPU * runtime.GOMAXPROCS(0))
	}
}
