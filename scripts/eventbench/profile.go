package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
)

// profiler takes the server's CPU profile over a stretch of unknown length (an ingest run
// and its drain) as back-to-back one-second profiles from serve --pprof, written to one
// directory: `go tool pprof BIN DIR/*.pprof` reads them as one profile. (The runtime's
// profile endpoint wants its length up front.)
type profiler struct {
	addr, dir string
	done      chan struct{}
	errs      chan error
}

// newProfiler picks a free loopback port for the server's --pprof and makes dir.
func newProfiler(dir string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	return &profiler{addr: addr, dir: dir, done: make(chan struct{}), errs: make(chan error, 1)}, nil
}

// start begins profiling; a nil profiler does nothing.
func (p *profiler) start() {
	if p == nil {
		return
	}
	go func() {
		var err error
		for i := 0; err == nil; i++ {
			select {
			case <-p.done:
				p.errs <- nil
				return
			default:
			}
			err = p.second(filepath.Join(p.dir, fmt.Sprintf("%04d.pprof", i)))
		}
		<-p.done
		p.errs <- err
	}()
}

// second writes one second of the server's CPU profile to path.
func (p *profiler) second(path string) error {
	res, err := http.Get("http://" + p.addr + "/debug/pprof/profile?seconds=1")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", res.Status)
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

// stop ends profiling after the current second.
func (p *profiler) stop() error {
	if p == nil {
		return nil
	}
	close(p.done)
	return <-p.errs
}
