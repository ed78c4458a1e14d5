package main

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// `inboxd serve` runs with two Ps per CPU (what /metrics reports), or with what
// GOMAXPROCS says.
func TestServeRunsTwoPsPerCPU(t *testing.T) {
	bin := inboxdBinary(t)
	// This test's own count is Go's default for the machine unless the variable set it.
	perCPU := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" {
		perCPU = 0
	}
	t.Setenv("GOMAXPROCS", "")
	got := servedProcs(t, bin)
	if perCPU > 0 {
		qt.Assert(t, got, qt.Equals, 2*perCPU)
	} else {
		qt.Assert(t, got%2 == 0 && got >= 2, qt.IsTrue, qt.Commentf("%d", got))
	}
	t.Setenv("GOMAXPROCS", "3")
	qt.Assert(t, servedProcs(t, bin), qt.Equals, 3)
}

// servedProcs starts the server and reads go_sched_gomaxprocs_threads from its /metrics.
func servedProcs(t *testing.T, bin string) int {
	t.Helper()
	p := startInboxd(t, bin, "--db", filepath.Join(t.TempDir(), "p.db"))
	defer p.kill(t)
	res, err := http.Get(p.api + "/metrics")
	qt.Assert(t, err, qt.IsNil)
	defer res.Body.Close()
	qt.Assert(t, res.StatusCode, qt.Equals, http.StatusOK)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_sched_gomaxprocs_threads "); ok {
			n, err := strconv.Atoi(v)
			qt.Assert(t, err, qt.IsNil)
			return n
		}
	}
	t.Fatal("no go_sched_gomaxprocs_threads in /metrics")
	return 0
}
