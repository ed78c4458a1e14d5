package benchkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Usage is what a process has used so far: its CPU time (user and system; with the work
// it did, a steadier figure than a rate on a machine whose speed drifts), the bytes it
// wrote, and the bytes it read from storage (ioBytes).
type Usage struct {
	CPU           time.Duration
	Wrote, Stored int64
	Read          int64
}

// UsageOf reads a process's Usage from /proc.
func UsageOf(pid int) (Usage, error) {
	var u Usage
	var err error
	if u.CPU, err = cpuTime(pid); err != nil {
		return u, err
	}
	u.Wrote, u.Stored, u.Read, err = ioBytes(pid)
	return u, err
}

// cpuTime is the CPU time (user and system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return ticks(f[11:13]), nil // utime, stime
}

// statFields are /proc/PID/stat's fields after the command name (which may hold spaces),
// from the state on: f[1] is the parent, f[11:15] utime, stime, cutime, cstime.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("benchkit: short /proc/%d/stat", pid)
	}
	return f, nil
}

// ticks adds up clock-tick fields: Linux reports ticks of 1/100 s (USER_HZ) on every
// architecture Go runs on.
func ticks(fields []string) time.Duration {
	var n int64
	for _, v := range fields {
		t, _ := strconv.ParseInt(v, 10, 64)
		n += t
	}
	return time.Duration(n) * 10 * time.Millisecond
}

// TreeCPU is the CPU time (user and system) of a process, of its children that still run
// and of those it has waited for: a PostgreSQL cluster's postmaster and its backends.
func TreeCPU(pid int) (time.Duration, error) {
	own, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	total := ticks(own[11:15]) // utime, stime, cutime, cstime
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if f, err := statFields(child); err == nil && f[1] == strconv.Itoa(pid) {
			total += ticks(f[11:13])
		}
	}
	return total, nil
}

// LoadAvg is the machine's load average over 1, 5 and 15 minutes ("?" if unknown): beside
// a figure, it tells how much else ran.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// ioBytes is what a process has written so far, through write(2) and its kind (wchar)
// and to storage (write_bytes: what reached the block layer, so page-cache writes of a
// file deleted before writeback do not count), and what it has read from storage
// (read_bytes: pages that were not in the page cache), from /proc/PID/io.
func ioBytes(pid int) (syscalls, storage, read int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "wchar":
			syscalls = n
		case "write_bytes":
			storage = n
		case "read_bytes":
			read = n
		}
	}
	return syscalls, storage, read, nil
}
