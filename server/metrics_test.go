package server_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/smtp"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/server"
)

// scrape reads GET /metrics, checking the text format line by line, into series -> value.
func scrape(t *testing.T, url, token string) (int, map[string]float64) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	qt.Assert(t, err, qt.IsNil)
	defer res.Body.Close()
	if res.StatusCode != 200 {
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	qt.Assert(t, res.Header.Get("Content-Type"), qt.Equals, "text/plain; version=0.0.4; charset=utf-8")
	sample := regexp.MustCompile(`^([a-z_]+)(\{[a-z_]+="[^"\\\n]*"(,[a-z_]+="[^"\\\n]*")*\})? (\S+)$`)
	typed := map[string]bool{}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "#" && f[1] == "TYPE" {
			qt.Assert(t, typed[f[2]], qt.IsFalse, qt.Commentf("%s typed twice", f[2]))
			typed[f[2]] = true
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		m := sample.FindStringSubmatch(line)
		qt.Assert(t, m, qt.Not(qt.IsNil), qt.Commentf("not a sample line: %q", line))
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
		qt.Assert(t, typed[m[1]] || typed[family], qt.IsTrue, qt.Commentf("%s has no TYPE", m[1]))
		v, err := strconv.ParseFloat(m[4], 64)
		qt.Assert(t, err, qt.IsNil, qt.Commentf("%q", line))
		out[m[1]+m[2]] = v
	}
	return 200, out
}

// TestMetrics counts requests by operation and status with their latency, SMTP outcomes
// and queue depths, and keeps /metrics behind its token when one is set.
func TestMetrics(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	metrics := server.NewMetrics()
	e := newEnvWith(t, serverOptions{api: func(cfg *server.Config) { cfg.Metrics, cfg.MetricsToken = metrics, "s3cret-metrics" },
		smtp: &server.SMTPConfig{Metrics: metrics}})
	token := e.full
	_, err := db.CreateInbox(ctx, e.store, db.NewInbox{AccountID: "acme", Address: "support@" + testDomain, DefaultDomain: testDomain})
	c.Assert(err, qt.IsNil)

	// The token: nothing without it, not with an API key, not with a wrong one.
	status, _ := scrape(t, e.url, "")
	c.Assert(status, qt.Equals, 401)
	status, _ = scrape(t, e.url, token)
	c.Assert(status, qt.Equals, 401)
	status, _ = scrape(t, e.url, "s3cret-metricz")
	c.Assert(status, qt.Equals, 401)

	get := func(path, key string) {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		c.Assert(err, qt.IsNil)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	for range 3 {
		get("/v1/inboxes", token)
	}
	get("/v1/inboxes", "bze_nope")
	get("/v1/inboxes/support%40inboxd.test/messages", token)
	get("/no/such/route/"+strings.Repeat("x", 10), token)

	// SMTP: one message stored, one recipient refused.
	addr := e.smtpAddr
	c.Assert(smtp.SendMail(addr, nil, "ann@customer.example", []string{"support@" + testDomain},
		testMessage("m1", "support@"+testDomain, "Hello")), qt.IsNil)
	c.Assert(smtp.SendMail(addr, nil, "ann@customer.example", []string{"nobody@elsewhere.example"},
		testMessage("m2", "nobody@elsewhere.example", "Hello")), qt.ErrorMatches, ".*550.*")

	status, m := scrape(t, e.url, "s3cret-metrics")
	c.Assert(status, qt.Equals, 200)
	c.Check(m[`inboxd_http_requests_total{op="listInboxes",status="200"}`], qt.Equals, 3.0)
	c.Check(m[`inboxd_http_requests_total{op="listInboxes",status="401"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_http_requests_total{op="listMessages",status="200"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_http_requests_total{op="not_found",status="404"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_http_requests_total{op="metrics",status="401"}`], qt.Equals, 3.0)
	c.Check(m[`inboxd_http_request_duration_seconds_count{op="listInboxes"}`], qt.Equals, 4.0)
	c.Check(m[`inboxd_http_request_duration_seconds_bucket{op="listInboxes",le="+Inf"}`], qt.Equals, 4.0)
	c.Check(m[`inboxd_http_request_duration_seconds_bucket{op="listInboxes",le="0.001"}`] <= 4, qt.IsTrue)
	c.Check(m[`inboxd_http_request_duration_seconds_sum{op="listInboxes"}`] > 0, qt.IsTrue)
	c.Check(m[`inboxd_smtp_messages_total{result="accepted"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_smtp_recipients_total{result="accepted"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_smtp_recipients_total{result="rejected"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_smtp_connections_total{result="accepted"}`], qt.Equals, 2.0)
	// The stored message waits for triage (no worker runs here) and for the index.
	c.Check(m[`inboxd_queue_depth{queue="triage"}`], qt.Equals, 1.0)
	c.Check(m[`inboxd_queue_depth{queue="outbound"}`], qt.Equals, 0.0)
	for _, state := range []string{"ready", "relay", "attempting", "handoff"} { // zero, not absent
		v, ok := m[`inboxd_outbound_queue_rows{state="`+state+`"}`]
		c.Check(ok && v == 0, qt.IsTrue, qt.Commentf("%s", state))
	}
	_, ok := m[`inboxd_queue_depth{queue="index"}`]
	c.Check(ok, qt.IsTrue)
	c.Check(m["process_resident_memory_bytes"] > 0, qt.IsTrue)
	c.Check(m["go_goroutines"] > 0, qt.IsTrue)
	// The live heap is part of the heap's objects; the runtime maps more than it gave back.
	c.Check(m["go_heap_live_bytes"] > 0 && m["go_heap_live_bytes"] <= m["go_memory_total_bytes"], qt.IsTrue)
	c.Check(m["go_memory_total_bytes"] > m["go_memory_released_bytes"], qt.IsTrue)
	c.Check(m["go_sched_gomaxprocs_threads"], qt.Equals, float64(runtime.GOMAXPROCS(0)))
	c.Check(m[`inboxd_search_index_ready`], qt.Equals, 1.0)
	v, ok := m[`inboxd_search_index_degraded`]
	c.Check(ok && v == 0, qt.IsTrue)
	v, ok = m[`inboxd_search_index_failures_total`]
	c.Check(ok && v == 0, qt.IsTrue)
}
