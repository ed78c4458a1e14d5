package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// listen registers a webhook to a local receiver and opens streams; every arrival goes
// to a (webhook) or s (streams). It returns a function that closes them.
func (r *rig) listen(ctx context.Context, hooks, streams int, a, s *arrivals) (func(), error) {
	url, stopRecv, err := receiver(a)
	if err != nil {
		return nil, err
	}
	if hooks > 0 {
		if err := r.webhook(ctx, url); err != nil {
			stopRecv()
			return nil, err
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	for range streams {
		if err := r.stream(sctx, s); err != nil {
			cancel()
			stopRecv()
			return nil, err
		}
	}
	return func() { cancel(); stopRecv() }, nil
}

// latency: mail at o.rate while a webhook and o.streams streams listen.
func latency(ctx context.Context, o options) error {
	r, err := newRig(ctx, o)
	if err != nil {
		return err
	}
	defer r.stop()
	hook, streams := newArrivals(), newArrivals()
	stop, err := r.listen(ctx, o.hooks, o.streams, hook, streams)
	if err != nil {
		return err
	}
	defer stop()
	msgs, to, ids := r.mail(int(o.rate)*o.seconds, o.size, 3)
	acked := make([]time.Time, len(msgs))
	fmt.Printf("latency: %d messages at %.0f/s to %d inboxes, one webhook and %d streams (load %s)\n",
		len(msgs), o.rate, len(r.rcpts), o.streams, benchkit.LoadAvg())
	if err := benchkit.Paced(r.srv.SMTP, msgs, to, o.rate, o.conns, func(i int, at time.Time) { acked[i] = at }); err != nil {
		return err
	}
	time.Sleep(5 * time.Second) // the last ones on their way
	report("stream", streams, ids, acked, o.streams)
	report("webhook", hook, ids, acked, 1)
	return nil
}

// report prints the percentiles of arrival minus acknowledgement, and what is missing or
// repeated (each message is expected copies times).
func report(name string, a *arrivals, ids []string, acked []time.Time, copies int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var lat []time.Duration
	missing, extra := 0, 0
	for i, id := range ids {
		got := a.at[id]
		missing += max(0, copies-len(got))
		extra += max(0, len(got)-copies)
		for _, t := range got {
			lat = append(lat, t.Sub(acked[i]))
		}
	}
	slices.Sort(lat)
	fmt.Printf("  %-8s p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  (%d arrivals, %d missing, %d repeated)\n", name,
		benchkit.Ms(benchkit.Pct(lat, 50)), benchkit.Ms(benchkit.Pct(lat, 99)), benchkit.Ms(benchkit.Pct(lat, 100)), len(lat), missing, extra)
}

// ingest: the SMTP ingest rate bare and listened to, in turns (bare, listened, listened,
// bare; -turns times).
func ingest(ctx context.Context, o options) error {
	fmt.Printf("ingest: %d messages per run over %d connections; listened = %d webhook and %d streams\n", o.n, o.conns, o.hooks, o.streams)
	rates, cpus := map[bool][]float64{}, map[bool][]float64{}
	run := 0
	for range o.turns {
		for _, listened := range []bool{false, true, true, false} {
			run++
			rate, cpu, own, err := ingestOnce(ctx, o, listened, run)
			if err != nil {
				return err
			}
			rates[listened], cpus[listened] = append(rates[listened], rate), append(cpus[listened], cpu)
			fmt.Printf("  %-8s %7.0f msg/s  server CPU %4.0f us/message, eventbench's own %4.0f  (load %s)\n",
				map[bool]string{false: "bare", true: "listened"}[listened], rate, cpu, own, benchkit.LoadAvg())
		}
	}
	fmt.Printf("  listened/bare: %.2f (means of %d runs each); server CPU the listeners add: %.0f us/message\n",
		mean(rates[true])/mean(rates[false]), len(rates[true]), mean(cpus[true])-mean(cpus[false]))
	return nil
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// ingestOnce is one ingest run on a fresh server: its rate, and the server's and
// eventbench's own CPU per message until the server's queues are empty. The listeners
// read every event and drop it unparsed: the machine is shared with the server, and
// what a consumer does with an event is the consumer's cost, not the server's.
func ingestOnce(ctx context.Context, o options, listened bool, run int) (rate, cpuPerMsg, ownPerMsg float64, err error) {
	var prof *profiler
	var extra []string
	if o.profile != "" {
		name := fmt.Sprintf("%s-%s-%02d-%s", filepath.Base(o.bin), time.Now().UTC().Format("150405"), run, map[bool]string{false: "bare", true: "listened"}[listened])
		if prof, err = newProfiler(filepath.Join(o.profile, name)); err != nil {
			return 0, 0, 0, err
		}
		extra = []string{"--pprof", prof.addr}
	}
	r, err := newRig(ctx, o, extra...)
	if err != nil {
		return 0, 0, 0, err
	}
	defer r.stop()
	if listened {
		stop, err := r.listen(ctx, o.hooks, o.streams, nil, nil)
		if err != nil {
			return 0, 0, 0, err
		}
		defer stop()
	}
	msgs, to, _ := r.mail(o.n, o.size, 1)
	pid, self := r.srv.Cmd.Process.Pid, os.Getpid()
	before, err := benchkit.UsageOf(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	ownBefore, err := benchkit.UsageOf(self)
	if err != nil {
		return 0, 0, 0, err
	}
	prof.start()
	res, err := benchkit.Ingest(r.srv.SMTP, msgs, to, o.conns, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := benchkit.Drain(ctx, 5*time.Minute, r.srv.API.Metrics()); err != nil {
		return 0, 0, 0, err
	}
	after, err := benchkit.UsageOf(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	ownAfter, err := benchkit.UsageOf(self)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := prof.stop(); err != nil {
		return 0, 0, 0, err
	}
	perMsg := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(res.N) }
	return res.Rate(), perMsg(after.CPU - before.CPU), perMsg(ownAfter.CPU - ownBefore.CPU), nil
}

// idle: o.idle streams and o.idle waits on a server that receives nothing.
func idle(ctx context.Context, o options) error {
	r, err := newRig(ctx, o, "--http-max-connections", strconv.Itoa(2*o.idle+100))
	if err != nil {
		return err
	}
	defer r.stop()
	pid := r.srv.Cmd.Process.Pid
	time.Sleep(2 * time.Second)
	rssBefore, err := rss(pid)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range o.idle {
		if err := r.stream(sctx, nil); err != nil {
			return err
		}
	}
	since := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	var wg sync.WaitGroup
	errs := make(chan error, o.idle)
	for i := range o.idle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := benchkit.InboxPath(r.rcpts[i%len(r.rcpts)]) + "/messages/wait?timeout=60&since=" + since
			if err := r.srv.API.Do(sctx, "GET", path, nil, nil); err != nil && sctx.Err() == nil {
				errs <- err
			}
		}()
	}
	time.Sleep(5 * time.Second) // every wait is in
	rssAfter, err := rss(pid)
	if err != nil {
		return err
	}
	cpu0, err := benchkit.UsageOf(pid)
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(o.idleSeconds) * time.Second)
	cpu1, err := benchkit.UsageOf(pid)
	if err != nil {
		return err
	}
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Printf("idle: %d streams and %d waits: resident %.1f MB -> %.1f MB (+%.1f MB); server CPU %.2f%% of one core over %d s (load %s)\n",
		o.idle, o.idle, mb(rssBefore), mb(rssAfter), mb(rssAfter-rssBefore),
		100*(cpu1.CPU-cpu0.CPU).Seconds()/float64(o.idleSeconds), o.idleSeconds, benchkit.LoadAvg())
	cancel()
	wg.Wait()
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// rss is a process's resident memory in bytes, from /proc.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
