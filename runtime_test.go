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
	"time"

	qt "github.com/frankban/quicktest"
)

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
	return int(metricOf(t, p.api, "go_sched_gomaxprocs_threads"))
}

// `inboxd serve` collects garbage at GOGC=400 with a soft memory limit of 112 MiB, the
// limit set once the search index serves; GOGC and GOMEMLIMIT from the environment win.
func TestServeCollectorSettings(t *testing.T) {
	bin := inboxdBinary(t)
	for _, tc := range []struct {
		gogc, memlimit    string
		percent, limitMiB int64
	}{
		{"", "", 400, 112},
		{"150", "1GiB", 150, 1024},
	} {
		t.Setenv("GOGC", tc.gogc)
		t.Setenv("GOMEMLIMIT", tc.memlimit)
		p := startInboxd(t, bin, "--db", filepath.Join(t.TempDir(), "gc.db"))
		qt.Assert(t, metricOf(t, p.api, "go_gc_gogc_percent"), qt.Equals, tc.percent)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got := metricOf(t, p.api, "go_gc_gomemlimit_bytes")
			if got == tc.limitMiB<<20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GOGC=%q GOMEMLIMIT=%q: memory limit %d, want %d MiB", tc.gogc, tc.memlimit, got, tc.limitMiB)
			}
		}
		p.kill(t)
	}
}

// metricOf reads one unlabelled metric from the server's /metrics.
func metricOf(t *testing.T, api, name string) int64 {
	t.Helper()
	res, err := http.Get(api + "/metrics")
	qt.Assert(t, err, qt.IsNil)
	defer res.Body.Close()
	qt.Assert(t, res.StatusCode, qt.Equals, http.StatusOK)
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			qt.Assert(t, err, qt.IsNil)
			return n
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}
