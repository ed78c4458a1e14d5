package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// Some tests run the real binary as a process, to kill it with SIGKILL (what a power cut
// or the OOM killer does) or to drive it as a user would. It is built once per kind, with
// this test binary's build tags.
var (
	// raceBinary has this test binary's -race setting too, so its packages come from the
	// build cache.
	raceBinary = &builtBinary{race: true}
	// fastBinary has no race detector: a race-instrumented server starts several times
	// slower, and the crash loops start it hundreds of times. Races are the business of
	// the in-process tests.
	fastBinary = &builtBinary{}

	buildDirsMu sync.Mutex
	buildDirs   []string // removed by TestMain
)

type builtBinary struct {
	race bool
	once sync.Once
	path string
	err  error
}

// get returns the binary, building it on first use; it skips t in -short mode, saying why.
func (b *builtBinary) get(t *testing.T, why string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "inboxd-bin-")
		if err != nil {
			b.err = err
			return
		}
		buildDirsMu.Lock()
		buildDirs = append(buildDirs, dir)
		buildDirsMu.Unlock()
		b.path = filepath.Join(dir, "inboxd")
		args := []string{"build", "-o", b.path}
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				switch {
				case s.Key == "-tags":
					args = append(args, "-tags", s.Value)
				case s.Key == "-race" && s.Value == "true" && b.race:
					args = append(args, "-race")
				}
			}
		}
		if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// inboxdBinary is the binary as the test binary was built (race detector included).
func inboxdBinary(t *testing.T) string { return raceBinary.get(t, "builds and runs the binary") }

// crashBinary is the binary without the race detector, for the crash loops.
func crashBinary(t *testing.T) string {
	return fastBinary.get(t, "builds the binary and kills it hundreds of times")
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range buildDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}
