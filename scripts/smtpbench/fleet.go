package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// fleet is the inboxd processes of one run and their database: a SQLite file, or a
// throwaway PostgreSQL cluster they share.
type fleet struct {
	servers []*benchkit.Server
	db      string // the file or the postgres:// URL
	pgPid   int    // the cluster's postmaster; 0 on SQLite
	// statements is -pg-statements: report what PostgreSQL did in each SMTP run.
	statements bool
}

// startCluster starts a PostgreSQL cluster with scripts/pg-cluster.sh and points the fleet
// at it; stop removes it. pg_stat_statements is loaded, so that a run can be asked for its
// statements per message (CREATE EXTENSION pg_stat_statements, then the view).
func (f *fleet) startCluster() (stop func(), err error) {
	// Not under the run's own 0700 directory: as root the cluster runs as another user.
	dir, err := os.MkdirTemp("", "smtpbench-pg-")
	if err != nil {
		return nil, err
	}
	script := filepath.Join("scripts", "pg-cluster.sh")
	cmd := exec.Command(script, "start", dir)
	cmd.Env = append(os.Environ(), "PG_OPTS=-c shared_preload_libraries=pg_stat_statements")
	out, err := cmd.Output()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s start: %w", script, err)
	}
	stop = func() { exec.Command(script, "stop", dir).Run() }
	pid, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err == nil {
		f.pgPid, err = strconv.Atoi(strings.SplitN(string(pid), "\n", 2)[0])
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("postmaster.pid: %w", err)
	}
	f.db = strings.TrimSpace(string(out))
	fmt.Println("PostgreSQL:", f.db, "in", dir)
	return stop, nil
}

// start starts o.procs servers; on PostgreSQL each has a directory of its own (log,
// --data-dir), and the ones after the first use the key the first printed.
func (f *fleet) start(o options, dir, dns, key string, extra []string) error {
	for i := range o.procs {
		pdir, args := dir, extra
		if o.pg {
			pdir = filepath.Join(dir, fmt.Sprintf("p%d", i))
			if err := os.Mkdir(pdir, 0o755); err != nil {
				return err
			}
			args = append([]string{"--data-dir", filepath.Join(pdir, "data")}, extra...)
		}
		srv, err := benchkit.StartServerOn(o.bin, pdir, f.db, dns, key, args)
		if err != nil {
			return err
		}
		key = srv.API.Key
		f.servers = append(f.servers, srv)
	}
	return nil
}

func (f *fleet) stop() {
	for _, s := range f.servers {
		s.Stop()
	}
}

func (f *fleet) String() string {
	kind := "SQLite"
	if f.pgPid != 0 {
		kind = "PostgreSQL"
	}
	return fmt.Sprintf("%d process(es) on %s", len(f.servers), kind)
}

// metrics are the processes' /metrics.
func (f *fleet) metrics() []benchkit.MetricsSource {
	out := make([]benchkit.MetricsSource, len(f.servers))
	for i, s := range f.servers {
		out[i] = s.API.Metrics()
	}
	return out
}

// smtp is every server's SMTP listener.
func (f *fleet) smtp() []string {
	var addrs []string
	for _, s := range f.servers {
		addrs = append(addrs, s.SMTP)
	}
	return addrs
}

// usage is what the servers and PostgreSQL have used so far: the servers' CPU, writes and
// reads added up, PostgreSQL's CPU in pg.
type usage struct {
	benchkit.Usage
	pg time.Duration
}

func (f *fleet) usage() (usage, error) {
	var u usage
	for _, s := range f.servers {
		one, err := benchkit.UsageOf(s.Cmd.Process.Pid)
		if err != nil {
			return u, err
		}
		u.CPU += one.CPU
		u.Wrote += one.Wrote
		u.Stored += one.Stored
		u.Read += one.Read
	}
	if f.pgPid != 0 {
		var err error
		if u.pg, err = benchkit.TreeCPU(f.pgPid); err != nil {
			return u, err
		}
	}
	return u, nil
}

// pgShare describes PostgreSQL's CPU per operation between two usages ("" on SQLite).
func (f *fleet) pgShare(before, after usage, ops int) string {
	if f.pgPid == 0 {
		return ""
	}
	return fmt.Sprintf(" in inboxd and %.0f us in PostgreSQL", float64((after.pg-before.pg).Microseconds())/float64(ops))
}

// benchReads measures getMessage (the recipient inboxes' latest 100 messages each) and
// listMessages (their first page) with clients concurrent clients dealt between the
// servers, for d each, and reports the rate and the CPU per request.
func benchReads(ctx context.Context, f *fleet, rcpts []string, clients int, d time.Duration) error {
	if strings.HasPrefix(f.db, "postgres://") {
		if err := waitForStatistics(ctx, f.db); err != nil {
			return err
		}
	}
	var paths []string
	for _, in := range rcpts {
		var page struct {
			Messages []struct {
				MessageID string `json:"messageId"`
			} `json:"messages"`
		}
		if err := f.servers[0].API.Do(ctx, "GET", benchkit.InboxPath(in)+"/messages?limit=100", nil, &page); err != nil {
			return err
		}
		for _, m := range page.Messages {
			paths = append(paths, benchkit.InboxPath(in)+"/messages/"+url.PathEscape(m.MessageID))
		}
	}
	if len(paths) == 0 {
		return fmt.Errorf("reads: the inboxes list no messages")
	}
	ops := []struct {
		name string
		path func(i int) string
	}{
		{"getMessage", func(i int) string { return paths[i%len(paths)] }},
		{"listMessages", func(i int) string { return benchkit.InboxPath(rcpts[i%len(rcpts)]) + "/messages" }},
	}
	for _, op := range ops {
		before, err := f.usage()
		if err != nil {
			return err
		}
		n, err := readLoop(ctx, f, clients, d, op.path)
		if err != nil {
			return fmt.Errorf("%s: %w", op.name, err)
		}
		after, err := f.usage()
		if err != nil {
			return err
		}
		fmt.Printf("%s, %d clients to %s: %.0f requests/s; per request %.0f us of CPU%s; load average %s\n", op.name, clients, f,
			float64(n)/d.Seconds(), float64((after.CPU-before.CPU).Microseconds())/float64(n), f.pgShare(before, after, int(n)), benchkit.LoadAvg())
	}
	return nil
}

// readLoop runs clients loops of GET path(i) for d, client c on server c mod N, and
// returns how many were answered.
func readLoop(ctx context.Context, f *fleet, clients int, d time.Duration, path func(i int) string) (int64, error) {
	var done atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := f.servers[c%len(f.servers)].API
			for i := c; time.Now().Before(deadline); i += clients {
				if err := api.Do(ctx, "GET", path(i), nil, nil); err != nil {
					failed.Store(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	return done.Load(), nil
}
