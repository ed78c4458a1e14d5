package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts inboxd serve on the database and returns once /healthz answers 200,
// with the time that took from the start of the process.
func startServer(bin, dir, dbPath, dns string, pprof bool) (*server, time.Duration, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, 0, err
		}
		ports[i] = p
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
