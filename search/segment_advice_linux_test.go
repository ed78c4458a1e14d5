package search

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
	qt "github.com/frankban/quicktest"
)

// persistedIndex returns an index of 50 messages opened again from its files, so its
// segments are mapped files, and the index's directory.
func persistedIndex(t *testing.T) (*Index, string) {
	dir := filepath.Join(t.TempDir(), "x.index")
	ix, _, err := Open(dir)
	qt.Assert(t, err, qt.IsNil)
	bt := ix.NewBatch()
	for i := int64(1); i <= 50; i++ {
		bt.Put(&Doc{ID: i, Inbox: 1, TS: i, Subject: "kiwi", Body: "a body to index"})
	}
	done := make(chan error, 1)
	qt.Assert(t, ix.Apply(bt, 1, "s", func(err error) { done <- err }), qt.IsNil)
	qt.Assert(t, <-done, qt.IsNil)
	qt.Assert(t, ix.Close(), qt.IsNil)
	ix, _, err = Open(dir)
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { ix.Close() })
	return ix, dir
}

var mappingHeader = regexp.MustCompile(`^[0-9a-f]+-[0-9a-f]+ `)

// segmentMappings reads /proc/self/smaps for the mappings of the segment files under dir:
// how many there are, how many the kernel marks advised random ("rr"), and the KiB of
// them resident.
func segmentMappings(t *testing.T, dir string) (mapped, random, rssKiB int) {
	f, err := os.Open("/proc/self/smaps")
	qt.Assert(t, err, qt.IsNil)
	defer f.Close()
	inSegment := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if mappingHeader.MatchString(line) { // a mapping's first line; anonymous ones have no path
			inSegment = len(fields) >= 6 && strings.HasPrefix(fields[5], dir) && strings.HasSuffix(fields[5], ".zap")
			if inSegment {
				mapped++
			}
			continue
		}
		switch {
		case !inSegment:
		case strings.HasPrefix(line, "VmFlags:") && strings.Contains(line+" ", " rr "):
			random++
		case fields[0] == "Rss:":
			kib, err := strconv.Atoi(fields[1])
			qt.Assert(t, err, qt.IsNil)
			rssKiB += kib
		}
	}
	qt.Assert(t, sc.Err(), qt.IsNil)
	return mapped, random, rssKiB
}

// The segment files an index maps are advised random (segment_advice.go).
func TestSegmentMappingsAreAdvisedRandom(t *testing.T) {
	_, dir := persistedIndex(t)
	mapped, random, _ := segmentMappings(t, dir)
	qt.Assert(t, mapped > 0, qt.IsTrue)
	qt.Assert(t, random, qt.Equals, mapped)
}

// Releasing the mappings (segment_release.go) leaves none of their pages resident. A
// search for words reads the dictionaries and postings through the file
// (segment_terms.go), so it maps none again once it knows where they are; a body phrase reads the stored pair filters
// through the mapping, and those pages are released in turn.
func TestReleasedMappingsHoldNoPagesAndWordSearchesMapNone(t *testing.T) {
	ix, dir := persistedIndex(t)
	search := func(q string) int {
		hits, _, err := ix.Search(context.Background(), Request{Inbox: 1, Query: Parse(q), Limit: 100})
		qt.Assert(t, err, qt.IsNil)
		return len(hits)
	}
	resident := func() int {
		_, _, rss := segmentMappings(t, dir)
		return rss
	}
	// The start read the documents' keys through the mapping, and the first search the
	// addresses of the dictionaries it reads (once a segment).
	qt.Assert(t, search("kiwi body -absent"), qt.Equals, 50)
	qt.Assert(t, resident() > 0, qt.IsTrue)

	ix.releaseMappings()
	qt.Assert(t, resident(), qt.Equals, 0)
	qt.Assert(t, search("kiwi"), qt.Equals, 50)
	qt.Assert(t, search("kiwi body -absent"), qt.Equals, 50)
	qt.Assert(t, resident(), qt.Equals, 0)

	qt.Assert(t, search(`"body to index"`), qt.Equals, 50)
	qt.Assert(t, resident() > 0, qt.IsTrue)
	ix.releaseMappings()
	qt.Assert(t, resident(), qt.Equals, 0)
}

// A merge releases the pages it mapped reading its sources as it goes (mergeReleaseSize),
// so its sources are not resident whole when it ends. Released every 64 KB written here,
// what is left is what the last stretch read.
func TestMergeReleasesItsSourcesAsItGoes(t *testing.T) {
	defer func(n uint64) { mergeReleaseSize = n }(mergeReleaseSize)
	dir := t.TempDir()
	var segs []segment.Segment
	size := 0
	for i := range 3 {
		sb, ok := buildOurs(t, analyzedDocs(benchDocs(500))).(*zap.SegmentBase)
		qt.Assert(t, ok, qt.IsTrue)
		path := filepath.Join(dir, fmt.Sprintf("in%d.zap", i))
		qt.Assert(t, zap.PersistSegmentBase(sb, path), qt.IsNil)
		s, err := (&zap.ZapPlugin{}).Open(path)
		qt.Assert(t, err, qt.IsNil)
		defer s.Close()
		segs = append(segs, s)
		fi, err := os.Stat(path)
		qt.Assert(t, err, qt.IsNil)
		size += int(fi.Size())
	}
	merge := func(release uint64) int {
		mergeReleaseSize = release
		for _, s := range segs {
			advise(s.(*zap.Segment).Data(), adviceDontNeed)
		}
		out := filepath.Join(t.TempDir(), "out.zap")
		_, _, err := mergeSegments(segs, nil, out, nil, nil)
		qt.Assert(t, err, qt.IsNil)
		_, _, rss := segmentMappings(t, dir)
		return rss * 1024
	}
	// Without a release in the merge, it maps most of what it read; with one, little.
	qt.Assert(t, merge(1<<62) > size/2, qt.IsTrue, qt.Commentf("sources %d bytes", size))
	left := merge(64 << 10)
	qt.Assert(t, left < size/8, qt.IsTrue, qt.Commentf("%d of %d bytes left mapped", left, size))
}
