package main

import (
	"runtime/debug"
	"testing"

	qt "github.com/frankban/quicktest"
)

// tuneGC sets inboxd's collector defaults, and leaves what GOGC or GOMEMLIMIT chose.
func TestTuneGC(t *testing.T) {
	c := qt.New(t)
	gc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer debug.SetGCPercent(gc)
	defer debug.SetMemoryLimit(limit)

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	debug.SetGCPercent(100)
	tuneGC()
	c.Assert(debug.SetGCPercent(100), qt.Equals, defaultGCPercent)
	c.Assert(debug.SetMemoryLimit(-1), qt.Equals, int64(defaultMemoryLimit))

	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	tuneGC()
	c.Assert(debug.SetGCPercent(100), qt.Equals, 150)
	c.Assert(debug.SetMemoryLimit(-1), qt.Equals, int64(1<<30))
}
