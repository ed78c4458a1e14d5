package search

import (
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
	zap "github.com/blevesearch/zapx/v17"
)

// Every page the server reads through a segment file's mapping stays in its resident
// memory until the segment is closed, though the page belongs to the page cache: the
// kernel keeps it there whether or not it is mapped, and reads it from the disk again
// only once it has reclaimed it. A merge reads its sources whole and searches reach all
// over a large index: on the benchmark's 200,000 messages the server's file-backed
// resident memory (the binary's ~25 MB in it) came to 133-167 MB while mail arrived, and
// to 27-41 MB with this release (BENCHMARKS.md, tenth session). (Searches read the
// dictionaries and postings without the mapping: segment_terms.go.) So every releaseEvery the
// index drops its mappings' pages from the process (MADV_DONTNEED on a read-only shared
// file mapping: the contents stay, and a page read again is mapped again, from the page
// cache if it is still there). The index then holds what it read in the last interval,
// like SQLite, which reads the database file through the page cache without mapping it.
// A shorter interval costs searches the faults that map their pages again: at 100 ms a
// search loop answered 3-8% fewer a second, and its peak went from ~197 to ~140 MB.
const releaseEvery = time.Second

// releaseLoop releases the mappings every releaseEvery until stop is closed.
func (ix *Index) releaseLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ix.releaseMappings()
		}
	}
}

// releaseMappings drops the mapped pages of the segment files of the current snapshot.
// The snapshot holds a reference to each segment, so none is unmapped while it is
// advised: advice on an address range since reused by other memory could zero it.
func (ix *Index) releaseMappings() {
	adv, err := ix.b.Advanced()
	if err != nil {
		return
	}
	r, err := adv.Reader()
	if err != nil {
		return
	}
	defer r.Close()
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return
	}
	for _, ss := range is.Segments() {
		if zs, ok := ss.Segment().(*zap.Segment); ok {
			advise(zs.Data(), adviceDontNeed)
		}
	}
}
