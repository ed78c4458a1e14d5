package main

import (
	"os"
	"runtime/debug"
)

// The garbage collector's defaults, unless GOGC or GOMEMLIMIT set them. Go's defaults
// (GOGC=100, no limit) collect whenever the heap doubles, and inboxd's live heap is small
// (10-40 MB while it ingests): it collected ~15 times a second under a stream of mail,
// about a tenth of the server's CPU. A collection when the heap has grown fivefold, with
// a soft limit of 160 MiB on the Go runtime's memory, collects far less often and keeps
// resident memory where it was: measured with scripts/smtpbench.sh, server CPU per
// message 1,052 -> 890 us, peak RssAnon 200 -> 204 MB (GOGC=400 alone: 626 MB). Past the
// limit the collector works harder instead of letting the heap grow; a deployment whose
// heap needs more (very large messages) sets GOMEMLIMIT higher. A rebuild of the search
// index lifts the limit while it runs (search.Rebuild): it holds hundreds of megabytes of
// batches at once, and under the limit it took four times as long.
//
// A lower limit keeps the resident memory down at the price of the collector's work. In
// the eleventh session, scripts/bench.sh with 128 MiB peaked at 194-204 MB of VmRSS
// against 229-231 MB with 160 MiB, but SMTP ingest alone measured 1,925-2,053 msg/s
// against 2,191-2,207 (the ingest's CPU profile: collector 4.4% against 2.5%, and
// returning memory to the kernel 1.9% against 1.6%). 160 MiB stays the default; a
// deployment that counts memory more than throughput sets GOMEMLIMIT=128MiB.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 160 << 20
)

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
