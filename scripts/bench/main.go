// Command bench measures the whole inboxd server under load (issue 9) and writes the
// "Whole server (issue 9)" section of BENCHMARKS.md with a latency chart under docs/.
//
// It generates a seeded data set straight into a database through the db package (200
// inboxes of 500 messages and one inbox of 100,000: threads, HTML parts, attachments,
// labels, triage results and protection verdicts), builds the search index with
// `inboxd reindex`, starts the real binary on loopback and measures: time from process
// start to a 200 from /healthz; getMessage, listMessages and listThreads (first page and
// page 50), getThread and search at 1, 8 and 64 concurrent clients; 1,000 API sends to a
// local inbox until delivered; SMTP ingest of 2 KB messages over 8 connections, alone and
// while another client searches in a loop; resident memory at rest and under load; and the
// database bytes each ingested message adds.
//
//	scripts/bench.sh            # full run, about 5 minutes on the quiet 2-core machine
//	scripts/bench.sh --quick    # smoke test under a minute; writes nothing in the repo
//	scripts/bench.sh --profile /tmp/prof   # also CPU and heap profiles of the server
package main

import (
	"bufio"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

type options struct {
	bin, out, chart, chartLink, profile, cmdline string
	quick, keep                                  bool
	seed                                         uint64
	waitLoad                                     float64
}

func main() {
	benchkit.OwnRuntime() // the environment's GOGC, GOMEMLIMIT, GOMAXPROCS are the server's
	var o options
	flag.StringVar(&o.bin, "bin", "", "inboxd binary to measure (required)")
	flag.BoolVar(&o.quick, "quick", false, "small data set and short runs: a smoke test that every operation answers")
	flag.StringVar(&o.out, "out", "", "markdown file whose \"Whole server (issue 9)\" section is written (default BENCHMARKS.md; a temporary file with --quick)")
	flag.StringVar(&o.chart, "chart", "", "PNG chart path (default docs/bench-latency.png; a temporary file with --quick)")
	flag.StringVar(&o.profile, "profile", "", "directory for CPU and heap profiles of the server")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (database, server log)")
	flag.Uint64Var(&o.seed, "seed", 9, "seed of the data set")
	flag.Float64Var(&o.waitLoad, "wait-load", 0, "before measuring, wait (at most 10 minutes) until the 1-minute load average is below this; 0 does not wait")
	flag.StringVar(&o.cmdline, "cmdline", "scripts/bench.sh", "the command recorded in the report")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "bench: -bin is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

type results struct {
	when       time.Time
	took       time.Duration
	quick      bool
	cmdline    string
	machine    machine
	loadBefore string
	loadServe  string // when the measurements start (the index build just loaded both cores)
	loadAfter  string
	sc         scale
	ds         *dataset
	dbBytes    int64
	reindex    time.Duration
	starts     []time.Duration
	rest       mem   // at rest
	rssLoad    int64 // KiB, largest VmRSS sampled under load
	anonLoad   int64 // KiB, largest RssAnon sampled under load
	end        mem   // after the load
	ops        []opResult
	levels     []int
	sends      benchkit.SendResult
	ingest     benchkit.IngestResult
	perMessage float64 // database bytes per ingested message
	msgSize    float64 // mean size of an ingested message
	during     benchkit.IngestResult
	searches   opResult // the search loop beside the second ingest
	profiles   []string
}

func run(ctx context.Context, o options) error {
	begin := time.Now()
	sc := fullScale
	if o.quick {
		sc = quickScale
	}
	dir, err := os.MkdirTemp("", "inboxd-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		logf("working directory %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.out == "" {
		o.out = "BENCHMARKS.md"
		if o.quick {
			o.out = filepath.Join(dir, "BENCHMARKS.md")
		}
	}
	o.chartLink = "docs/bench-latency.png"
	if o.chart == "" {
		o.chart = o.chartLink
		if o.quick {
			o.chart = filepath.Join(dir, "bench-latency.png")
		}
	}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	if o.waitLoad > 0 {
		waitForLoad(ctx, o.waitLoad)
		begin = time.Now() // the run's time starts once the machine is quiet enough
	}
	r := &results{when: time.Now().UTC(), quick: o.quick, cmdline: o.cmdline, machine: describeMachine(), sc: sc, levels: []int{1, 8, 64}}
	r.loadBefore = benchkit.LoadAvg()
	logf("load average %s", r.loadBefore)

	dbPath := filepath.Join(dir, "bench.db")
	logf("generating the data set: %d inboxes x %d messages + one inbox of %d", sc.small, sc.perSmall, sc.big)
	if o.profile != "" {
		// The generator's own profile: data set generation is most of a run's time.
		f, err := os.Create(filepath.Join(o.profile, "cpu-generate.pprof"))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	ds, err := generate(ctx, dbPath, sc, o.seed, logf)
	if o.profile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return fmt.Errorf("data set: %w", err)
	}
	r.ds = ds
	logf("  %d messages in %.1f s (%.0f/s)", ds.messages, ds.genTime.Seconds(), float64(ds.messages)/ds.genTime.Seconds())

	logf("building the search index (inboxd reindex)")
	t := time.Now()
	cmd := exec.CommandContext(ctx, o.bin, "reindex", "--db", dbPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("reindex: %v\n%s", err, out)
	}
	r.reindex = time.Since(t)
	logf("  %.1f s", r.reindex.Seconds())
	if r.dbBytes, err = usedBytes(dbPath); err != nil {
		return err
	}

	dns, stopDNS, err := benchkit.FakeDNS()
	if err != nil {
		return err
	}
	defer stopDNS()

	r.loadServe = benchkit.LoadAvg()
	logf("start to healthy, %d starts; load average %s", sc.starts, r.loadServe)
	var srv *server
	for i := range sc.starts {
		s, took, err := startServer(o.bin, dir, dbPath, dns, o.profile != "")
		if err != nil {
			return err
		}
		r.starts = append(r.starts, took)
		if i < sc.starts-1 {
			s.stop()
		} else {
			srv = s
		}
	}
	defer srv.stop()
	logf("  %v", r.starts)
	time.Sleep(time.Second)
	r.rest = srv.memory()

	c := newClient(srv.base, ds.key)
	ops, err := operations(ctx, c, ds)
	if err != nil {
		return err
	}
	srv.sampling(true)
	profileWait := srv.profile(ctx, profilePath(o.profile, "cpu-reads.pprof"), time.Duration(len(ops)*len(r.levels))*(sc.opDuration+sc.warmup))
	diskRead := func() int64 {
		u, _ := benchkit.UsageOf(srv.cmd.Process.Pid)
		return u.Read
	}
	for i := 0; i < len(ops); i++ {
		op := ops[i]
		paired := op.withNext && i+1 < len(ops)
		var measured [2][]opResult // per operation, so that the report lists each one's levels together
		for _, conc := range r.levels {
			var got []opResult
			if paired {
				a, z := c.runInTurns(ctx, op, ops[i+1], conc, sc.warmup, sc.opDuration, 3, diskRead)
				got = []opResult{a, z}
			} else {
				before := diskRead()
				res := c.run(ctx, op, conc, sc.warmup, sc.opDuration)
				res.diskRead = diskRead() - before
				got = []opResult{res}
			}
			for j, res := range got {
				measured[j] = append(measured[j], res)
				logf("  %-17s %2d clients: %7.0f req/s  p50 %6.2f ms  p99 %7.2f ms  disk %5.1f KB/req  errors %d", res.op, conc, res.rps(), benchkit.Ms(res.p50), benchkit.Ms(res.p99), res.diskKBPerAnswer(), res.errors)
				if res.errors > 0 {
					logf("    first error: %s", res.firstErr)
				}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		r.ops = append(append(r.ops, measured[0]...), measured[1]...)
		if paired {
			i++
		}
	}
	if err := profileWait(); err != nil {
		logf("  cpu profile: %v", err)
	}

	logf("API sends to a local inbox: %d, 8 concurrent", sc.sends)
	profileWait = srv.profile(ctx, profilePath(o.profile, "cpu-sends.pprof"), time.Duration(sc.sends)*2*time.Millisecond)
	if r.sends, err = c.Sends(ctx, ds.senders, ds.target, sendText, sc.sends, 8); err != nil {
		return err
	}
	if err := profileWait(); err != nil {
		logf("  cpu profile: %v", err)
	}
	logf("  accepted after %.2f s, all delivered after %.2f s", r.sends.Accepted.Seconds(), r.sends.Delivered.Seconds())
	if err := benchkit.Drain(ctx, sc.drainLimit, benchkit.MetricsSource{Base: srv.base}); err != nil {
		return err
	}

	corp := newCorpus(o.seed + 1)
	rcpts := []string{}
	for _, in := range ds.small[:min(8, len(ds.small))] {
		rcpts = append(rcpts, in.addr)
	}
	msgs, to := ingestMessages(corp, sc.ingest, 2048, rcpts, "ingest")
	for _, m := range msgs {
		r.msgSize += float64(len(m))
	}
	r.msgSize /= float64(len(msgs))
	before, err := usedBytes(dbPath)
	if err != nil {
		return err
	}
	logf("SMTP ingest: %d messages of ~%.0f bytes over 8 connections", len(msgs), r.msgSize)
	profileWait = srv.profile(ctx, profilePath(o.profile, "cpu-ingest.pprof"), min(sc.ingestLimit, time.Duration(float64(len(msgs))/2000*float64(time.Second))))
	if r.ingest, err = benchkit.Ingest(srv.smtp, msgs, to, 8, sc.ingestLimit); err != nil {
		return err
	}
	logf("  %.0f msg/s (p50 %.1f ms, p99 %.1f ms)", r.ingest.Rate(), benchkit.Ms(r.ingest.P50), benchkit.Ms(r.ingest.P99))
	if err := profileWait(); err != nil {
		logf("  cpu profile: %v", err)
	}
	logf("  waiting for the index and triage queues to drain")
	if err := benchkit.Drain(ctx, sc.drainLimit, benchkit.MetricsSource{Base: srv.base}); err != nil {
		return err
	}
	after, err := usedBytes(dbPath)
	if err != nil {
		return err
	}
	r.perMessage = float64(after-before) / float64(r.ingest.N)
	logf("  %.0f database bytes per message", r.perMessage)

	logf("SMTP ingest while another client searches in a loop")
	msgs, to = ingestMessages(corp, sc.ingest, 2048, rcpts, "during")
	searchOp := ops[len(ops)-1]
	stopSearch := make(chan struct{})
	var searchRes opResult
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		searchRes = c.loop(ctx, searchOp, stopSearch)
	}()
	r.during, err = benchkit.Ingest(srv.smtp, msgs, to, 8, sc.ingestLimit)
	close(stopSearch)
	wg.Wait()
	if err != nil {
		return err
	}
	r.searches = searchRes
	logf("  %.0f msg/s (p50 %.1f ms, p99 %.1f ms); %d searches beside it (p50 %.1f ms, p99 %.1f ms, errors %d)", r.during.Rate(), benchkit.Ms(r.during.P50), benchkit.Ms(r.during.P99),
		searchRes.n, benchkit.Ms(searchRes.p50), benchkit.Ms(searchRes.p99), searchRes.errors)
	srv.sampling(false)
	r.rssLoad, r.anonLoad = srv.peakRSS()
	r.end = srv.memory()
	if err := srv.heapProfile(ctx, profilePath(o.profile, "heap.pprof")); err != nil {
		logf("  heap profile: %v", err)
	}
	if o.profile != "" {
		r.profiles = []string{"cpu-reads.pprof", "cpu-sends.pprof", "cpu-ingest.pprof", "heap.pprof", "cpu-generate.pprof (the harness generating the data set)"}
		logf("profiles in %s: %s (go tool pprof -top %s %s)", o.profile, strings.Join(r.profiles, ", "), o.bin, filepath.Join(o.profile, "cpu-ingest.pprof"))
	}
	r.loadAfter = benchkit.LoadAvg()
	r.took = time.Since(begin)

	if err := os.MkdirAll(filepath.Dir(o.chart), 0o755); err != nil {
		return err
	}
	if err := drawChart(o.chart, r.ops, r.levels); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	if err := writeSection(o.out, report(r, o.chartLink)); err != nil {
		return err
	}
	logf("wrote %s and %s in %.0f s; load average %s", o.out, o.chart, r.took.Seconds(), r.loadAfter)
	var failed []string
	for _, op := range r.ops {
		if op.errors > 0 || op.answered == 0 {
			failed = append(failed, fmt.Sprintf("%s at %d clients: %d answered, %d errors (%s)", op.op, op.conc, op.answered, op.errors, op.firstErr))
		}
	}
	if searchRes.n == 0 {
		failed = append(failed, "no search answered during the ingest")
	}
	if len(failed) > 0 {
		return fmt.Errorf("operations failed:\n  %s", strings.Join(failed, "\n  "))
	}
	return nil
}

// loop repeats op with one client until stop is closed.
func (c *client) loop(ctx context.Context, op operation, stop chan struct{}) opResult {
	res := opResult{op: op.name, conc: 1}
	var lats []time.Duration
	rng := newCorpus(99).Rng
	start := time.Now()
	for {
		select {
		case <-stop:
			res.elapsed = time.Since(start)
			slices.Sort(lats)
			res.n, res.p50, res.p99 = len(lats), benchkit.Pct(lats, 50), benchkit.Pct(lats, 99)
			return res
		default:
		}
		t := time.Now()
		if err := c.Do(ctx, "GET", op.path(rng), nil, nil); err != nil {
			res.errors++
			if res.firstErr == "" {
				res.firstErr = err.Error()
			}
			continue
		}
		lats = append(lats, time.Since(t))
	}
}

func profilePath(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// usedBytes is the database's size without its free pages, as a reader sees it (WAL
// included): what the data takes, whether or not it was checkpointed yet.
func usedBytes(path string) (int64, error) {
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	var size, pages, free int64
	if err := conn.QueryRow("PRAGMA page_size").Scan(&size); err != nil {
		return 0, err
	}
	if err := conn.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		return 0, err
	}
	if err := conn.QueryRow("PRAGMA freelist_count").Scan(&free); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

type machine struct {
	cpus   int
	memory string
	model  string
	kernel string
	goVer  string
}

func describeMachine() machine {
	m := machine{cpus: runtime.NumCPU(), goVer: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.model = strings.TrimSpace(v)
				break
			}
		}
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == "MemTotal" {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	return m
}

func load1() float64 {
	f := strings.Fields(benchkit.LoadAvg())
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func waitForLoad(ctx context.Context, limit float64) {
	deadline := time.Now().Add(10 * time.Minute)
	for load1() >= limit && time.Now().Before(deadline) && ctx.Err() == nil {
		logf("load average %s: waiting for the 1-minute figure to fall below %.2f", benchkit.LoadAvg(), limit)
		time.Sleep(15 * time.Second)
	}
}
