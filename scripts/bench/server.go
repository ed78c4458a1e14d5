package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// server is one running inboxd process.
type server struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:port
	smtp    string
	pprof   string // host:port of the pprof listener, "" when off
	logFile *os.File
	exited  chan struct{}

	mu      sync.Mutex
	maxRSS  int64 // KiB, sampled
	maxAnon int64 // KiB, sampled: RssAnon, the process's own memory
	sample  bool
}

// mem is a reading of /proc/PID/status, in KiB.
type mem struct {
	rss, hwm, anon, file int64
}

// freePort returns a loopback TCP port that is free now and not in taken. It comes from
// below the kernel's range of ephemeral ports: a port from that range (what listening on
// port 0 hands out) can be taken by any outgoing connection before inboxd binds it, and
// the harness opens thousands (a start once failed with "address already in use").
func freePort(taken []int) (int, error) {
	lo := ephemeralLow()
	for range 1000 {
		p := 10000 + rand.IntN(max(lo-10000, 1))
		if slices.Contains(taken, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port in 10000-%d", lo-1)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default when
// it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 10001 {
		return 32768
	}
	return lo
}

// startServer starts inboxd serve on the database and returns once /healthz answers 200,
// with the time that took from the start of the process.
func startServer(bin, dir, dbPath, dns string, pprof bool) (*server, time.Duration, error) {
	var ports []int
	for range 3 {
		p, err := freePort(ports)
		if err != nil {
			return nil, 0, err
		}
		ports = append(ports, p)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	s := &server{base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), smtp: fmt.Sprintf("127.0.0.1:%d", ports[1]), logFile: logf, exited: make(chan struct{})}
	args := []string{"serve", "--db", dbPath, "--http", s.base[len("http://"):], "--smtp", s.smtp, "--domain", domain, "--dns", dns}
	if pprof {
		s.pprof = fmt.Sprintf("127.0.0.1:%d", ports[2])
		args = append(args, "--pprof", s.pprof)
	}
	s.cmd = exec.Command(bin, args...)
	benchkit.DieWithParent(s.cmd)
	s.cmd.Stdout = logf
	s.cmd.Stderr = logf
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		return nil, 0, err
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	for {
		res, err := client.Get(s.base + "/healthz")
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		select {
		case <-s.exited:
			logf.Close()
			return nil, 0, fmt.Errorf("inboxd exited at start; see %s", logf.Name())
		case <-time.After(time.Millisecond):
		}
		if time.Since(start) > 2*time.Minute {
			s.stop()
			return nil, 0, fmt.Errorf("inboxd not healthy after 2 minutes; see %s", logf.Name())
		}
	}
	took := time.Since(start)
	go s.sampleRSS()
	return s, took, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.logFile.Close()
}

// memory reads VmRSS, VmHWM, RssAnon and RssFile of the process. RssFile is mostly the
// search index's memory-mapped segment files: page cache the kernel can drop.
func (s *server) memory() (m mem) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			m.rss = n
		case "VmHWM":
			m.hwm = n
		case "RssAnon":
			m.anon = n
		case "RssFile":
			m.file = n
		}
	}
	return m
}

// sampleRSS keeps the largest VmRSS seen while sampling is on (under load).
func (s *server) sampleRSS() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.exited:
			return
		case <-t.C:
		}
		s.mu.Lock()
		on := s.sample
		s.mu.Unlock()
		if !on {
			continue
		}
		m := s.memory()
		s.mu.Lock()
		s.maxRSS = max(s.maxRSS, m.rss)
		s.maxAnon = max(s.maxAnon, m.anon)
		s.mu.Unlock()
	}
}

func (s *server) sampling(on bool) {
	s.mu.Lock()
	s.sample = on
	s.mu.Unlock()
}

func (s *server) peakRSS() (rss, anon int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxRSS, s.maxAnon
}

// profile fetches a CPU profile of the next d into path, in the background; the returned
// function waits for it.
func (s *server) profile(ctx context.Context, path string, d time.Duration) func() error {
	if s.pprof == "" || path == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() {
		secs := max(1, int(d.Round(time.Second)/time.Second))
		done <- fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.pprof, secs), path)
	}()
	return func() error { return <-done }
}

func (s *server) heapProfile(ctx context.Context, path string) error {
	if s.pprof == "" || path == "" {
		return nil
	}
	return fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/heap", s.pprof), path)
}

func fetch(ctx context.Context, url, path string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
