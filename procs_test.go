package main

import (
	"runtime"
	"testing"

	qt "github.com/frankban/quicktest"
)

// tuneProcs gives the server two Ps per CPU, and leaves what GOMAXPROCS chose.
func TestTuneProcs(t *testing.T) {
	c := qt.New(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))

	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(3)
	tuneProcs()
	c.Assert(runtime.GOMAXPROCS(0), qt.Equals, 6)

	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	tuneProcs()
	c.Assert(runtime.GOMAXPROCS(0), qt.Equals, 3)
}
