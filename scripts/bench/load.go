package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

// client is the load generator's HTTP side: keep-alive connections, one per concurrent
// caller, as API clients hold them.
type client struct{ *benchkit.API }

func newClient(base, key string) *client {
	return &client{&benchkit.API{Base: base, Key: key, HTTP: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true, IdleConnTimeout: time.Minute}}}}
}

// operation is one API call the load generator repeats; path picks its target.
// withNext marks the first of two operations the report compares (a list's first page
// and its page 50): they are measured in turns (runInTurns).
type operation struct {
	name     string
	path     func(rng *rand.Rand) string
	withNext bool
}

type opResult struct {
	op       string
	conc     int
	n        int
	answered int // successful answers, warm-up included: the smoke test needs one
	errors   int
	firstErr string
	elapsed  time.Duration
	p50, p99 time.Duration
	diskRead int64 // bytes the server read from storage during the run, warm-up included
}

func (r opResult) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

// diskKBPerAnswer is what the server read from storage per answer, in KB.
func (r opResult) diskKBPerAnswer() float64 {
	return float64(r.diskRead) / 1024 / float64(max(r.answered, 1))
}

// run keeps conc callers busy with op for warmup, then for d, and measures the second part.
func (c *client) run(ctx context.Context, op operation, conc int, warmup, d time.Duration) opResult {
	res, lats := c.measure(ctx, op, conc, warmup, d)
	return res.withLatencies(lats)
}

// runInTurns measures two operations that are compared with each other (a list's first
// page and its page 50) at the same concurrency, in turns: slices of d/turns in the order
// a b b a a b ..., so that the machine's drift falls on both alike. Measured one after the
// other in 3-second windows on the 2-CPU benchmark machine, the two pages (whose queries
// cost the same) differed by up to a third either way at one client, and the comparison
// allows 10% (BENCHMARKS.md, fifteenth session).
// Each gets warmup once (in its first slice) and d in all. diskRead reads the server's
// storage reads so far; each result gets those of its own slices.
func (c *client) runInTurns(ctx context.Context, a, b operation, conc int, warmup, d time.Duration, turns int,
	diskRead func() int64) (opResult, opResult) {
	ops := [2]operation{a, b}
	var res [2]opResult
	var lats [2][]time.Duration
	for t, i := range turnOrder(turns) {
		w := time.Duration(0)
		if t < 2 { // each operation's first slice: the order starts a b
			w = warmup
		}
		before := diskRead()
		r, l := c.measure(ctx, ops[i], conc, w, d/time.Duration(turns))
		r.diskRead = diskRead() - before
		lats[i] = append(lats[i], l...)
		res[i] = res[i].add(r)
	}
	return res[0].withLatencies(lats[0]), res[1].withLatencies(lats[1])
}

// turnOrder is the order of runInTurns' slices, by index into the pair: a b, b a, a b, ...
// (the pair's order flips every turn), turns slices each.
func turnOrder(turns int) []int {
	order := make([]int, 0, 2*turns)
	for t := range turns {
		if t%2 == 0 {
			order = append(order, 0, 1)
		} else {
			order = append(order, 1, 0)
		}
	}
	return order
}

// add sums two measurements of the same operation.
func (r opResult) add(o opResult) opResult {
	if r.op == "" {
		return o
	}
	r.answered += o.answered
	r.errors += o.errors
	if r.firstErr == "" {
		r.firstErr = o.firstErr
	}
	r.elapsed += o.elapsed
	r.diskRead += o.diskRead
	return r
}

// withLatencies sets the count and percentiles from a measurement's latencies.
func (r opResult) withLatencies(lats []time.Duration) opResult {
	slices.Sort(lats)
	r.n = len(lats)
	r.p50, r.p99 = benchkit.Pct(lats, 50), benchkit.Pct(lats, 99)
	return r
}

// measure keeps conc callers busy with op for warmup, then for d, and returns what the
// second part measured, with its latencies unsorted and the percentiles unset.
func (c *client) measure(ctx context.Context, op operation, conc int, warmup, d time.Duration) (opResult, []time.Duration) {
	var mu sync.Mutex
	res := opResult{op: op.name, conc: conc}
	var lats []time.Duration
	begin := time.Now()
	measureFrom := begin.Add(warmup)
	end := measureFrom.Add(d)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(conc)))
			var mine []time.Duration
			errs, first, ok := 0, "", 0
			for tries := 0; ; tries++ {
				t := time.Now()
				// Every caller asks at least once, however late a loaded machine starts it.
				if (t.After(end) && tries > 0) || ctx.Err() != nil {
					break
				}
				err := c.Do(ctx, "GET", op.path(rng), nil, nil)
				took := time.Since(t)
				if err == nil {
					ok++
				}
				if t.Before(measureFrom) {
					if err != nil {
						errs++
						if first == "" {
							first = err.Error()
						}
					}
					continue
				}
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				mine = append(mine, took)
			}
			mu.Lock()
			lats = append(lats, mine...)
			res.answered += ok
			res.errors += errs
			if res.firstErr == "" {
				res.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(measureFrom)
	return res, lats
}

// pageToken walks to page n (1-based) of a list and returns the token that fetches it.
func (c *client) pageToken(ctx context.Context, path string, n int) (string, error) {
	token := ""
	for range n - 1 {
		var page struct {
			NextPageToken string `json:"nextPageToken"`
		}
		p := path
		if token != "" {
			p += "?pageToken=" + url.QueryEscape(token)
		}
		if err := c.Do(ctx, "GET", p, nil, &page); err != nil {
			return "", err
		}
		if page.NextPageToken == "" {
			return "", fmt.Errorf("%s has fewer than %d pages", path, n)
		}
		token = page.NextPageToken
	}
	return token, nil
}

// operations builds the read operations over the data set.
func operations(ctx context.Context, c *client, ds *dataset) ([]operation, error) {
	type ref struct{ inbox, id string }
	var msgs, threads []ref
	for _, in := range append([]*inboxData{ds.big}, ds.small...) {
		p := benchkit.InboxPath(in.addr)
		for _, id := range in.msgIDs {
			msgs = append(msgs, ref{p, id})
		}
		for _, id := range in.threads {
			threads = append(threads, ref{p, id})
		}
	}
	big := benchkit.InboxPath(ds.big.addr)
	msgTok, err := c.pageToken(ctx, big+"/messages", 50)
	if err != nil {
		return nil, err
	}
	thrTok, err := c.pageToken(ctx, big+"/threads", 50)
	if err != nil {
		return nil, err
	}
	all := append([]*inboxData{ds.big}, ds.small...)
	return []operation{
		{name: "getMessage", path: func(r *rand.Rand) string {
			m := msgs[r.IntN(len(msgs))]
			return m.inbox + "/messages/" + url.PathEscape(m.id)
		}},
		{name: "listMessages p1", path: func(*rand.Rand) string { return big + "/messages" }, withNext: true},
		{name: "listMessages p50", path: func(*rand.Rand) string { return big + "/messages?pageToken=" + url.QueryEscape(msgTok) }},
		{name: "listThreads p1", path: func(*rand.Rand) string { return big + "/threads" }, withNext: true},
		{name: "listThreads p50", path: func(*rand.Rand) string { return big + "/threads?pageToken=" + url.QueryEscape(thrTok) }},
		{name: "getThread", path: func(r *rand.Rand) string {
			t := threads[r.IntN(len(threads))]
			return t.inbox + "/threads/" + url.PathEscape(t.id)
		}},
		{name: "search", path: func(r *rand.Rand) string {
			in := ds.big
			if r.IntN(2) == 0 {
				in = all[1+r.IntN(len(all)-1)]
			}
			return benchkit.InboxPath(in.addr) + "/messages/search?query=" + url.QueryEscape(ds.queries[r.IntN(len(ds.queries))])
		}},
	}, nil
}

// sendText is the body of the API sends: a short note, as an agent's reply is.
const sendText = "Hello from the benchmark. Please find the figures for this week below.\n\nThanks,\nBench"
