package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MetricsSource is a server's GET /metrics: its base URL (http://host:port) and the bearer
// token --metrics-token makes it ask for ("" when open).
type MetricsSource struct {
	Base, Token string
	HTTP        *http.Client
}

// Metrics is where a's server publishes its metrics (open: the harnesses start servers
// without --metrics-token).
func (a *API) Metrics() MetricsSource { return MetricsSource{Base: a.Base, HTTP: a.HTTP} }

// Read returns the server's samples: each one's name with its labels, as written (e.g.
// `inboxd_queue_depth{queue="index"}`), to its value.
func (m MetricsSource) Read(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", m.Base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if m.Token != "" {
		req.Header.Set("Authorization", "Bearer "+m.Token)
	}
	client := m.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return nil, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("GET /metrics: %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// QueueDepths are the server's durable queues behind what it acknowledged, as /metrics
// names them: deliveries not finished, changes the search index has not applied, and
// messages waiting for triage.
func QueueDepths() [3]string {
	return [3]string{`inboxd_queue_depth{queue="outbound"}`, `inboxd_queue_depth{queue="index"}`, `inboxd_queue_depth{queue="triage"}`}
}

// Drain waits until every server has finished the work behind what it acknowledged: its
// outbound, search index and triage queues are empty (each process of a fleet indexes for
// itself, so each is asked). It fails after limit, or when a server's metrics lack a queue.
func Drain(ctx context.Context, limit time.Duration, servers ...MetricsSource) error {
	deadline := time.Now().Add(limit)
	for {
		left, err := queued(ctx, servers)
		if err != nil || left == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("queues still hold %.0f entries after %v", left, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// queued sums the servers' queue depths.
func queued(ctx context.Context, servers []MetricsSource) (float64, error) {
	total := 0.0
	for _, s := range servers {
		m, err := s.Read(ctx)
		if err != nil {
			return 0, err
		}
		for _, q := range QueueDepths() {
			n, ok := m[q]
			if !ok {
				return 0, fmt.Errorf("%s/metrics has no %s", s.Base, q)
			}
			total += n
		}
	}
	return total, nil
}
