package main

import (
	"os"
	"runtime/debug"
)

// The garbage collector's defaults, unless GOGC or GOMEMLIMIT set them. Go's defaults
// (GOGC=100, no limit) collect whenever the heap doubles, and inboxd's live heap is small
// (10-40 MB while it ingests): it collected ~15 times a second under a stream of mail,
// about a tenth of the server's CPU. A collection when the heap has grown fivefold, with
// a soft limit on the Go runtime's memory, collects far less often and keeps resident
// memory bounded: measured with scripts/smtpbench.sh, server CPU per message 1,052 -> 890
// us (GOGC=400 alone: 626 MB of RssAnon). Past the limit the collector works harder
// instead of letting the heap grow; a deployment whose heap needs more (very large
// messages) sets GOMEMLIMIT higher. A rebuild of the search index lifts the limit while
// it runs (search.Rebuild): it holds hundreds of megabytes of batches at once, and under
// the limit it took four times as long.
//
// The limit sets the resident memory's peak under load: scripts/bench.sh peaked at 238 MB
// of VmRSS with 160 MiB (four runs), 206 MB with 128 (three) and 192-196 MB with 112. What
// it costs is collections while the indexer builds a batch (search.Options.BatchSize):
// during the bench's SMTP ingest the collector took 3.7% of the server's CPU at 112 MiB
// with batches of 1,000 rows, 8.8% with 2,000, and 2.1% at 160 MiB with 2,000 (CPU
// profiles). Earlier sessions measured lower limits as 7-10% slower ingest, but their
// GOMEMLIMIT applied to the load generator too, whose heap is 150-190 MB while it drives
// the ingest (benchkit.OwnRuntime; BENCHMARKS.md, thirteenth session).
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 112 << 20
)

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
