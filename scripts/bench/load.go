package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// client is the load generator's HTTP side: keep-alive connections, one per concurrent
// caller, as API clients hold them.
type client struct {
	base string
	key  string
	http *http.Client
}

func newClient(base, key string) *client {
	return &client{base: base, key: key, http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true, IdleConnTimeout: time.Minute}}}
}

// do sends one request and reads the whole answer; a status other than 200 is an error.
func (c *client) do(ctx context.Context, method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		if len(b) > 300 {
			b = b[:300]
		}
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// operation is one API call the load generator repeats; path picks its target.
type operation struct {
	name string
	path func(rng *rand.Rand) string
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
}

func (r opResult) rps() float64 { return float64(r.n) / r.elapsed.Seconds() }

// run keeps conc callers busy with op for warmup, then for d, and measures the second part.
func (c *client) run(ctx context.Context, op operation, conc int, warmup, d time.Duration) opResult {
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
				err := c.do(ctx, "GET", op.path(rng), nil, nil)
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
	slices.Sort(lats)
	res.n = len(lats)
	res.p50, res.p99 = pct(lats, 50), pct(lats, 99)
	return res
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func inboxPath(addr string) string { return "/v1/inboxes/" + url.PathEscape(addr) }

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
		if err := c.do(ctx, "GET", p, nil, &page); err != nil {
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
		p := inboxPath(in.addr)
		for _, id := range in.msgIDs {
			msgs = append(msgs, ref{p, id})
		}
		for _, id := range in.threads {
			threads = append(threads, ref{p, id})
		}
	}
	big := inboxPath(ds.big.addr)
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
		{"getMessage", func(r *rand.Rand) string {
			m := msgs[r.IntN(len(msgs))]
			return m.inbox + "/messages/" + url.PathEscape(m.id)
		}},
		{"listMessages p1", func(*rand.Rand) string { return big + "/messages" }},
		{"listMessages p50", func(*rand.Rand) string { return big + "/messages?pageToken=" + url.QueryEscape(msgTok) }},
		{"listThreads p1", func(*rand.Rand) string { return big + "/threads" }},
		{"listThreads p50", func(*rand.Rand) string { return big + "/threads?pageToken=" + url.QueryEscape(thrTok) }},
		{"getThread", func(r *rand.Rand) string {
			t := threads[r.IntN(len(threads))]
			return t.inbox + "/threads/" + url.PathEscape(t.id)
		}},
		{"search", func(r *rand.Rand) string {
			in := ds.big
			if r.IntN(2) == 0 {
				in = all[1+r.IntN(len(all)-1)]
			}
			return inboxPath(in.addr) + "/messages/search?query=" + url.QueryEscape(ds.queries[r.IntN(len(ds.queries))])
		}},
	}, nil
}

type sendResult struct {
	n         int
	conc      int
	accepted  time.Duration // all requests answered
	delivered time.Duration // all messages listed in the target inbox
	p50, p99  time.Duration
}

// sends posts n API sends (conc at a time) from the sender inboxes to the local target
// inbox, then polls the target until it lists every one.
func (c *client) sends(ctx context.Context, ds *dataset, n, conc int) (sendResult, error) {
	res := sendResult{n: n, conc: conc}
	var (
		mu   sync.Mutex
		lats []time.Duration
		next int
		fail error
	)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				body := map[string]any{"to": []string{ds.target}, "subject": fmt.Sprintf("Bench %d", i),
					"text":           "Hello from the benchmark. Please find the figures for this week below.\n\nThanks,\nBench",
					"idempotencyKey": fmt.Sprintf("bench-%d", i)}
				t := time.Now()
				err := c.do(ctx, "POST", inboxPath(ds.senders[i%len(ds.senders)])+"/messages/send", body, nil)
				mu.Lock()
				if err != nil && fail == nil {
					fail = err
				}
				lats = append(lats, time.Since(t))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.accepted = time.Since(start)
	if fail != nil {
		return res, fail
	}
	slices.Sort(lats)
	res.p50, res.p99 = pct(lats, 50), pct(lats, 99)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := c.count(ctx, inboxPath(ds.target))
		if err != nil {
			return res, err
		}
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d sends delivered after 60 s", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.delivered = time.Since(start)
	return res, nil
}

func (c *client) count(ctx context.Context, inbox string) (int, error) {
	n, token := 0, ""
	for {
		var page struct {
			Messages      []json.RawMessage `json:"messages"`
			NextPageToken string            `json:"nextPageToken"`
		}
		p := inbox + "/messages?limit=100"
		if token != "" {
			p += "&pageToken=" + url.QueryEscape(token)
		}
		if err := c.do(ctx, "GET", p, nil, &page); err != nil {
			return 0, err
		}
		n += len(page.Messages)
		if page.NextPageToken == "" {
			return n, nil
		}
		token = page.NextPageToken
	}
}
