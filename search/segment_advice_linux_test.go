package search

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// The segment files an index maps are advised random (segment_advice.go): the kernel
// marks such a mapping "rr" in /proc/self/smaps.
func TestSegmentMappingsAreAdvisedRandom(t *testing.T) {
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
	ix, _, err = Open(dir) // the persisted segments are opened from their files
	qt.Assert(t, err, qt.IsNil)
	defer ix.Close()

	f, err := os.Open("/proc/self/smaps")
	qt.Assert(t, err, qt.IsNil)
	defer f.Close()
	mapped, random := 0, 0
	inSegment := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) >= 6 && strings.Contains(fields[0], "-") {
			inSegment = strings.HasPrefix(fields[5], dir) && strings.HasSuffix(fields[5], ".zap")
			if inSegment {
				mapped++
			}
			continue
		}
		if inSegment && strings.HasPrefix(line, "VmFlags:") && strings.Contains(line+" ", " rr ") {
			random++
		}
	}
	qt.Assert(t, sc.Err(), qt.IsNil)
	qt.Assert(t, mapped > 0, qt.IsTrue)
	qt.Assert(t, random, qt.Equals, mapped)
}
