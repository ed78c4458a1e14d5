package search

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// A merge's panic reaches scorch's merger, which recovers it and reports an index error,
// as it did before merges ran on a thread of their own.
func TestNicedRaisesPanicsInTheCaller(t *testing.T) {
	qt.Assert(t, func() { niced(mergeNice, func() { panic("merge broke") }) }, qt.PanicMatches, "merge broke")
	ran := false
	niced(mergeNice, func() { ran = true })
	qt.Assert(t, ran, qt.IsTrue)
}
