package benchkit

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	qt "github.com/frankban/quicktest"
)

// A harness run with the server's tuning in its environment keeps Go's defaults itself.
func TestOwnRuntime(t *testing.T) {
	c := qt.New(t)
	procs := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	defaultProcs := runtime.GOMAXPROCS(0) // the CPUs Go would use here (cgroup limits included)
	gc, limit := debug.SetGCPercent(400), debug.SetMemoryLimit(112<<20)
	runtime.GOMAXPROCS(1)
	defer debug.SetGCPercent(gc)
	defer debug.SetMemoryLimit(limit)
	defer runtime.GOMAXPROCS(procs)
	t.Setenv("GOMAXPROCS", "1")

	OwnRuntime()
	c.Assert(debug.SetGCPercent(100), qt.Equals, 100)
	c.Assert(debug.SetMemoryLimit(-1), qt.Equals, int64(math.MaxInt64))
	c.Assert(runtime.GOMAXPROCS(0), qt.Equals, defaultProcs)
}
