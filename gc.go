package main

import (
	"os"
	"runtime/debug"
)

// The garbage collector's defaults, unless GOGC or GOMEMLIMIT set them. Go's defaults
// (GOGC=100, no limit) collect whenever the heap doubles, and inboxd's live heap is small
// (10-40 MB while it ingests): it collected ~15 times a second under a stream of mail,
// about a tenth of the server's CPU. A collection when the heap has grown fivefold, with
// a soft limit on the Go runtime's memory, collects far less often and keeps
// resident memory where it was: measured with scripts/smtpbench.sh, server CPU per
// message 1,052 -> 890 us, peak RssAnon 200 -> 204 MB (GOGC=400 alone: 626 MB). Past the
// limit the collector works harder instead of letting the heap grow; a deployment whose
// heap needs more (very large messages) sets GOMEMLIMIT higher. A rebuild of the search
// index lifts the limit while it runs (search.Rebuild): it holds hundreds of megabytes of
// batches at once, and under the limit it took four times as long.
//
// The limit was 160 MiB until the eleventh session: the heap sat at it under a stream of
// mail, and the server's resident memory peaked at 240-265 MB in scripts/bench.sh. With
// the segment builders no longer kept between segments (~25 MB less live heap, so as
// much garbage fits between collections at 128 MiB) it peaked at 194 MB; in turns on the
// bench database, server CPU per message was within the noise of the old limit's
// (BENCHMARKS.md, eleventh session).
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 128 << 20
)

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}
