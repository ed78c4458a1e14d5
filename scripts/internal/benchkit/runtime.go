package benchkit

import (
	"math"
	"runtime"
	"runtime/debug"
)

// OwnRuntime gives the calling harness Go's default collector and processor settings,
// whatever GOGC, GOMEMLIMIT and GOMAXPROCS say. Those variables are there for the server
// the harness starts, which inherits the environment; applied to the load generator too,
// they measure a throttled client instead of the server. With GOMEMLIMIT=160MiB,
// smtpbench (which holds its 40,000 messages in memory, ~158 MB of heap) collected about
// 80 times a second and drove 856 msg/s against 2,150 with the limit on the server alone
// (BENCHMARKS.md, thirteenth session).
func OwnRuntime() {
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	runtime.SetDefaultGOMAXPROCS()
}
