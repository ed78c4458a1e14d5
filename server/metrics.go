package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/julienschmidt/httprouter"

	"github.com/inboxd/inboxd/db"
)

// Metrics counts what an operator watches: HTTP requests by operation and status with
// their latency, SMTP ingest outcomes, and, read at scrape time, the depths of the durable
// queues (outbound, search index, triage) and the process's memory. GET /metrics writes it
// in the Prometheus text exposition format (version 0.0.4). A handful of counters and
// histograms do not need a client library, so the format is written here.
//
// Labels come from closed sets (operation ids, status codes, fixed result names), never
// from request data, so the number of series stays bounded whatever clients send.
type Metrics struct {
	start time.Time

	mu       sync.Mutex
	requests map[requestKey]uint64
	latency  map[string]*histogram // by operation
	smtp     map[smtpKey]uint64
}

type requestKey struct {
	op     string
	status int
}

type smtpKey struct{ kind, result string }

// NewMetrics returns empty metrics; one value is shared by the HTTP server and the SMTP
// listener of a process.
func NewMetrics() *Metrics {
	return &Metrics{
		start:    time.Now(),
		requests: map[requestKey]uint64{},
		latency:  map[string]*histogram{},
		smtp:     map[smtpKey]uint64{},
	}
}

// latencyBuckets are the upper bounds, in seconds, of the request latency histogram.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(latencyBuckets, v) // first bound >= v
	h.counts[i]++
	h.sum += v
	h.n++
}

// observeRequest records one finished HTTP request.
func (m *Metrics) observeRequest(op string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[requestKey{op, status}]++
	h := m.latency[op]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.latency[op] = h
	}
	h.observe(d.Seconds())
}

// SMTP ingest outcomes. kind is "message", "recipient" or "connection".
const (
	smtpAccepted = "accepted"
	smtpRejected = "rejected" // a permanent refusal (5xx)
	smtpDeferred = "deferred" // a temporary refusal (4xx): the sender retries
	smtpFailed   = "failed"   // storage failed: 451, the sender retries
	// smtpRejectedPerIP is a connection refused with 421 because its client holds its
	// share of the connections (SMTPConfig.MaxPerAddress).
	smtpRejectedPerIP = "rejected_per_ip"
)

// countSMTP counts one SMTP outcome; nil metrics count nothing.
func (m *Metrics) countSMTP(kind, result string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.smtp[smtpKey{kind, result}]++
	m.mu.Unlock()
}

// smtpOutcome classifies an SMTP command's result: nil is accepted, a 5xx reply rejected,
// anything else (a 4xx reply, a broken transfer) temp.
func smtpOutcome(err error, temp string) string {
	if err == nil {
		return smtpAccepted
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code >= 500 {
		return smtpRejected
	}
	return temp
}

// operationOf names the routes outside the /v1 operations, for the op label. Anything
// unmatched is "other", so a scan of random paths cannot grow the series.
func operationOf(path string, status int) string {
	switch {
	case path == "/healthz":
		return "healthz"
	case path == "/openapi.json":
		return "openapi"
	case path == "/metrics":
		return "metrics"
	case path == "/mcp":
		return "mcp"
	case strings.HasPrefix(path, "/attachments/"):
		return "downloadAttachment"
	case strings.HasPrefix(path, "/dashboard"):
		return "dashboard"
	case status == http.StatusNotFound:
		return "not_found"
	}
	return "other"
}

// named tags the requests of one operation with its id, for the log line and metrics.
func named(op string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*statusRecorder); ok {
			rec.op = op
		}
		h(w, r)
	}
}

// handleMetrics serves GET /metrics. With a metrics token configured it needs
// Authorization: Bearer <token> (compared in constant time); API keys are not accepted.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.cfg.MetricsToken != "" {
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") ||
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.cfg.MetricsToken)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			writeError(w, db.Errorf(db.ECodeUnauthorized, "metrics need Authorization: Bearer <metrics token>"), s.log)
			return
		}
	}
	var b strings.Builder
	s.metrics.write(&b)
	s.dash.logins.write(&b)
	if s.cfg.Conns != nil {
		s.cfg.Conns.write(&b)
	}
	s.writeGauges(r.Context(), &b)
	s.writeWebhookMetrics(r.Context(), &b)
	s.events.writeMetrics(&b)
	h := w.Header()
	h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	io.WriteString(w, b.String())
}

// write prints the counters and histograms, in a stable order.
func (m *Metrics) write(b *strings.Builder) {
	m.mu.Lock()
	defer m.mu.Unlock()

	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].op != keys[j].op {
			return keys[i].op < keys[j].op
		}
		return keys[i].status < keys[j].status
	})
	header(b, "inboxd_http_requests_total", "counter", "HTTP requests by operation and status code.")
	for _, k := range keys {
		fmt.Fprintf(b, "inboxd_http_requests_total{op=%q,status=\"%d\"} %d\n", k.op, k.status, m.requests[k])
	}

	ops := make([]string, 0, len(m.latency))
	for op := range m.latency {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	header(b, "inboxd_http_request_duration_seconds", "histogram", "HTTP request latency by operation.")
	for _, op := range ops {
		h := m.latency[op]
		var cum uint64
		for i, c := range h.counts {
			cum += c
			le := "+Inf"
			if i < len(latencyBuckets) {
				le = strconv.FormatFloat(latencyBuckets[i], 'g', -1, 64)
			}
			fmt.Fprintf(b, "inboxd_http_request_duration_seconds_bucket{op=%q,le=%q} %d\n", op, le, cum)
		}
		fmt.Fprintf(b, "inboxd_http_request_duration_seconds_sum{op=%q} %s\n", op, float(h.sum))
		fmt.Fprintf(b, "inboxd_http_request_duration_seconds_count{op=%q} %d\n", op, h.n)
	}

	// Every SMTP series is printed, zeros included, so a rate() works from the first scrape.
	header(b, "inboxd_smtp_messages_total", "counter", "Messages received over SMTP by outcome: accepted (stored, 250), rejected (5xx), failed (not stored: a 451 or a transfer that broke off; the sender retries).")
	for _, r := range []string{smtpAccepted, smtpRejected, smtpFailed} {
		fmt.Fprintf(b, "inboxd_smtp_messages_total{result=%q} %d\n", r, m.smtp[smtpKey{"message", r}])
	}
	header(b, "inboxd_smtp_recipients_total", "counter", "SMTP RCPT commands by outcome: accepted, rejected (5xx), deferred (4xx).")
	for _, r := range []string{smtpAccepted, smtpRejected, smtpDeferred} {
		fmt.Fprintf(b, "inboxd_smtp_recipients_total{result=%q} %d\n", r, m.smtp[smtpKey{"recipient", r}])
	}
	header(b, "inboxd_smtp_connections_total", "counter", "SMTP connections: accepted, or rejected with 421 over the connection limit (rejected) or over the limit per client address (rejected_per_ip).")
	for _, r := range []string{smtpAccepted, smtpRejected, smtpRejectedPerIP} {
		fmt.Fprintf(b, "inboxd_smtp_connections_total{result=%q} %d\n", r, m.smtp[smtpKey{"connection", r}])
	}
}

// writeGauges reads the queue depths from the store and the index, and the process's
// resources. A failed read leaves its series out rather than failing the scrape.
func (s *Server) writeGauges(ctx context.Context, b *strings.Builder) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	header(b, "inboxd_queue_depth", "gauge", "Rows waiting in each durable queue: outbound (deliveries not finished), index (changes the search index has not applied), triage (messages waiting for analysis).")
	counts, outErr := s.store.OutboundCounts(ctx)
	if outErr == nil {
		total := 0
		for _, n := range counts {
			total += n
		}
		fmt.Fprintf(b, "inboxd_queue_depth{queue=\"outbound\"} %d\n", total)
	}
	if s.cfg.Search != nil {
		if last, err := s.store.IndexQueueLast(ctx); err == nil {
			fmt.Fprintf(b, "inboxd_queue_depth{queue=\"index\"} %d\n", max(0, last-s.cfg.Search.Applied()))
		}
	}
	if n, err := s.store.TriageQueueLen(ctx); err == nil {
		fmt.Fprintf(b, "inboxd_queue_depth{queue=\"triage\"} %d\n", n)
	}
	if outErr == nil {
		states := make([]string, 0, len(counts))
		for st := range counts {
			states = append(states, st)
		}
		sort.Strings(states)
		header(b, "inboxd_outbound_queue_rows", "gauge", "Outbound queue rows by state.")
		for _, st := range states {
			fmt.Fprintf(b, "inboxd_outbound_queue_rows{state=%q} %d\n", st, counts[st])
		}
	}
	if s.cfg.Search != nil {
		header(b, "inboxd_search_index_ready", "gauge", "1 when the search index answers, 0 while it is rebuilt.")
		n, err := s.cfg.Search.DocCount()
		ready := 0
		if err == nil {
			ready = 1
		}
		fmt.Fprintf(b, "inboxd_search_index_ready %d\n", ready)
		degraded := 0
		if s.cfg.Search.Degraded() {
			degraded = 1
		}
		header(b, "inboxd_search_index_degraded", "gauge", "1 while the search index fails to open, rebuild or apply changes and is retried with backoff; 0 when it works.")
		fmt.Fprintf(b, "inboxd_search_index_degraded %d\n", degraded)
		header(b, "inboxd_search_index_failures_total", "counter", "Failed attempts to open, rebuild or update the search index; each is retried.")
		fmt.Fprintf(b, "inboxd_search_index_failures_total %d\n", s.cfg.Search.Failures())
		if err == nil {
			header(b, "inboxd_search_index_documents", "gauge", "Messages the search index holds.")
			fmt.Fprintf(b, "inboxd_search_index_documents %d\n", n)
		}
	}

	s.cfg.Budget.writeMetrics(b)

	header(b, "inboxd_build_info", "gauge", "Always 1; the labels name the build.")
	fmt.Fprintf(b, "inboxd_build_info{version=%q,sqlite=%q,go=%q} 1\n", s.cfg.Version, s.cfg.SQLiteVersion, runtime.Version())
	header(b, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.")
	fmt.Fprintf(b, "process_start_time_seconds %d\n", s.metrics.start.Unix())
	if rss, ok := residentBytes(); ok {
		header(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
		fmt.Fprintf(b, "process_resident_memory_bytes %d\n", rss)
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		header(b, "process_open_fds", "gauge", "Open file descriptors.")
		fmt.Fprintf(b, "process_open_fds %d\n", len(fds))
	}
	header(b, "go_goroutines", "gauge", "Goroutines that currently exist.")
	fmt.Fprintf(b, "go_goroutines %d\n", runtime.NumGoroutine())
	header(b, "go_sched_gomaxprocs_threads", "gauge", "Threads that can run Go code at once (GOMAXPROCS).")
	fmt.Fprintf(b, "go_sched_gomaxprocs_threads %d\n", runtime.GOMAXPROCS(0))
	// The live heap (what the last collection kept) is what a leak grows; the heap's
	// objects also hold the garbage GOGC lets pile up before the next collection.
	gauges := []struct{ name, help, metric string }{
		{"go_heap_objects_bytes", "Bytes of live and not yet swept heap objects.", "/memory/classes/heap/objects:bytes"},
		{"go_heap_live_bytes", "Bytes of heap objects the last garbage collection kept.", "/gc/heap/live:bytes"},
		{"go_memory_total_bytes", "All memory mapped by the Go runtime.", "/memory/classes/total:bytes"},
		{"go_memory_released_bytes", "Memory the Go runtime mapped and gave back to the system.", "/memory/classes/heap/released:bytes"},
		// What GOGC and GOMEMLIMIT (or inboxd's defaults) set: README, "Install on a server".
		{"go_gc_gogc_percent", "Heap growth that triggers a garbage collection, in percent (GOGC).", "/gc/gogc:percent"},
		{"go_gc_gomemlimit_bytes", "The Go runtime's soft memory limit (GOMEMLIMIT).", "/gc/gomemlimit:bytes"},
	}
	sample := make([]metrics.Sample, len(gauges))
	for i, g := range gauges {
		sample[i].Name = g.metric
	}
	metrics.Read(sample)
	for i, g := range gauges {
		if sample[i].Value.Kind() == metrics.KindUint64 {
			header(b, g.name, "gauge", g.help)
			fmt.Fprintf(b, "%s %d\n", g.name, sample[i].Value.Uint64())
		}
	}
}

// residentBytes reads the resident set size from /proc (Linux only).
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

func header(b *strings.Builder, name, kind, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

func float(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
