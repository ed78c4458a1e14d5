package search

import zap "github.com/blevesearch/zapx/v17"

// Segment files are memory-mapped, and the kernel reads ahead around every page fault
// on a mapping unless told otherwise. A search's lookups land on random pages of the
// dictionaries and postings, so most of what was read around them went unused: searches
// from a cold page cache on a 1.6 GB index read 1,090 MB from the disk in 12 s with the
// default, and 481 MB advised random, and answered 106 then 665 requests a second against
// 392 then 681 (BENCHMARKS.md, ninth session). What the server maps counts in its
// resident memory too: 603 against 292 MB afterwards. So every segment is advised random
// when it is opened, and the readers that do go through a segment in order ask for it
// ahead: a merge for its sources whole, the start for each segment's id dictionary.

// adviseRandom marks seg's mapping for random access, when seg is a file zapx mapped.
func adviseRandom(seg any) {
	if zs, ok := seg.(*zap.Segment); ok {
		advise(zs.Data(), adviceRandom)
	}
}

// adviseWillNeed asks the kernel to read b ahead; b must be part of a segment file's
// mapping (not memory of the Go heap, which the advice would reach past).
func adviseWillNeed(b []byte) { advise(b, adviceWillNeed) }
