// Package server is everything that listens: the /v1 HTTP API, auth, error mapping,
// /openapi.json, /healthz, /metrics, attachment downloads, /mcp, the quarantine review
// dashboard and the inbound SMTP listener, with what they share (the memory budget, the
// connection caps, the search threads that yield to arriving mail). Handlers translate
// HTTP and SMTP to calls on db and mail; the rules live there.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/webhook"
	"github.com/inboxd/inboxd/schema"
	"github.com/inboxd/inboxd/search"
)

// MaxBodyBytes bounds every request body (API-NOTES section 3).
const MaxBodyBytes = 5 << 20

// Config is what the HTTP front door needs to know about its deployment.
type Config struct {
	BaseURL string // public base URL: download links and the OpenAPI servers entry
	Domain  string // default domain of new inboxes
	Version string
	// SQLiteVersion is the version of the SQLite library the store runs on, for /metrics.
	SQLiteVersion string
	// Search answers searchMessages; nil means the server runs without an index and the
	// operation answers 404.
	Search *search.Indexer
	// Metrics collects what GET /metrics shows (nil: the server keeps its own); share one
	// with the SMTP listener. MetricsToken, when set, is the bearer token /metrics needs.
	Metrics      *Metrics
	MetricsToken string
	// Budget bounds the bytes of request bodies (and mail, shared with the SMTP listener)
	// being processed at once (nil: unbounded).
	Budget *Budget
	// TrustedProxies are the reverse proxies (--trusted-proxy) whose X-Forwarded-For
	// names the client; the dashboard's login throttle and audit log go by that client.
	TrustedProxies []netip.Prefix
	// Conns is the HTTP server's connection cap, whose counts /metrics shows (nil: none).
	Conns *ConnLimit
	// TestControls serves the test controls under /_inboxd/ (controls.go), which need no
	// key; Clock is the clock they move, the one the store reads (required with them).
	TestControls bool
	Clock        *db.Clock
	// Faults are the fault rules the test controls set (nil: none, ever).
	Faults *mail.Faults
	// Streams tunes GET /v1/events and the waits for mail (events.go).
	Streams StreamConfig
	// Arrivals, when set, is the SMTP listener's count of messages being received
	// (SMTPConfig.Arrivals): while it is not zero, searches run on threads of lower CPU
	// priority (priority.go). Nil: searches always run on the request's own.
	Arrivals *Arrivals
	// WebhookAllowHTTP allows webhooks at http:// URLs of any host (serve
	// --webhook-allow-http); else http:// only to loopback.
	WebhookAllowHTTP bool
	// Webhooks is the webhook worker whose counts /metrics shows (nil: none runs here).
	Webhooks *webhook.Worker
}

// Server serves the HTTP API.
type Server struct {
	store   db.Store
	mail    *mail.Service
	schema  *schema.Validator
	cfg     Config
	log     *slog.Logger
	router  *httprouter.Router
	openapi []byte
	now     func() time.Time
	mcp     *mcpHandler // POST /mcp
	dash    *dashboard  // /dashboard/ (dashboard.go)
	metrics *Metrics    // GET /metrics (metrics.go)
	// lowPriority runs searches while mail arrives (priority.go); nil without Arrivals.
	lowPriority *lowPriority
	events      *eventsRuntime // streams and waits (events.go)
	// controls keep the test controls' fault rules and clock in step with the database's
	// (with Config.TestControls; controls.go).
	controls *mail.Controls
}

// New builds the HTTP handler.
func New(store db.Store, svc *mail.Service, v *schema.Validator, cfg Config, log *slog.Logger) (*Server, error) {
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	doc, err := v.OpenAPI(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("server: openapi: %w", err)
	}
	s := &Server{store: store, mail: svc, schema: v, cfg: cfg, log: log, openapi: doc, now: store.Now, metrics: cfg.Metrics}
	if s.metrics == nil {
		s.metrics = NewMetrics()
	}
	if cfg.TestControls && (cfg.Clock == nil || cfg.Faults == nil) {
		return nil, fmt.Errorf("server: test controls need the store's clock and the fault rules")
	}
	if s.events, err = newEventsRuntime(store, cfg.Streams, log); err != nil {
		return nil, fmt.Errorf("server: events: %w", err)
	}
	if err := s.startHandlers(); err != nil {
		s.events.close() // nothing else has started yet
		return nil, err
	}
	if cfg.Arrivals != nil {
		s.lowPriority = newLowPriority()
		if err := s.lowPriority.err; err != nil {
			log.Warn("searches run at normal CPU priority", "err", err)
		}
	}
	s.router = s.routes()
	return s, nil
}

// startHandlers builds the MCP handler, the dashboard and, if configured, the test
// controls: the parts of New that can fail once the events runtime runs.
func (s *Server) startHandlers() error {
	var err error
	if s.mcp, err = s.newMCPHandler(); err != nil {
		return fmt.Errorf("server: mcp: %w", err)
	}
	if s.dash, err = newDashboard(s); err != nil {
		return fmt.Errorf("server: dashboard: %w", err)
	}
	if s.cfg.TestControls {
		if s.controls, err = mail.NewControls(s.store, s.cfg.Clock, s.cfg.Faults, s.log); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	return nil
}

// Close stops what the server runs beside its handlers (the search threads); call it
// once no request is being served.
func (s *Server) Close() {
	if s.lowPriority != nil {
		s.lowPriority.stop()
	}
	s.events.close()
	if s.controls != nil {
		s.controls.Close()
	}
}

func (s *Server) routes() *httprouter.Router {
	r := httprouter.New()
	// Routing happens on the raw, still-encoded path (see ServeHTTP), so no cleaning or
	// redirecting: a Message-ID may decode to anything.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = false
	r.HandleOPTIONS = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodHead { // every GET route serves HEAD, from here (asGet)
			if h, ps, _ := r.Lookup(http.MethodGet, req.URL.Path); h != nil {
				h(w, asGet(req), ps)
				return
			}
		}
		writeError(w, db.Errorf(db.ECodeNotFound, "no route for %s %s", req.Method, req.URL.Path), s.log)
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		s.log.Error("panic", "method", req.Method, "path", req.URL.Path, "panic", v) // Path holds the raw path here
		writeError(w, fmt.Errorf("panic: %v", v), s.log)
	}
	handlers := map[string]handler{
		"listInboxes":         s.handleInboxesList,
		"createInbox":         s.handleInboxCreate,
		"getInbox":            s.handleInboxGet,
		"updateInbox":         s.handleInboxUpdate,
		"deleteInbox":         s.handleInboxDelete,
		"finishInboxSetup":    s.handleInboxSetup,
		"listMessages":        s.handleMessagesList,
		"getMessage":          s.handleMessageGet,
		"send":                s.handleMessageSend,
		"reply":               s.handleMessageReply,
		"updateMessageLabels": s.handleMessageLabels,
		"getAttachment":       s.handleAttachmentGet,
		"listThreads":         s.handleThreadsList,
		"getThread":           s.handleThreadGet,
		"updateThreadLabels":  s.handleThreadLabels,
		"getUsage":            s.handleUsageGet,
		"searchMessages":      s.handleMessagesSearch,
		"streamEvents":        s.handleEventsStream,
		"waitForMessages":     s.handleMessagesWait,
	}
	for id, h := range s.webhookHandlers() {
		handlers[id] = h
	}
	// httprouter cannot hold a static segment beside a parameter, so ".../messages/search"
	// (GET) and ".../messages/send" (POST) share the ".../messages/:messageId" node with
	// getMessage and reply's prefix; the literal wins, as upstream's table order has it.
	literal := map[string]map[string]http.HandlerFunc{} // method -> literal -> handler
	byParam := map[string]http.HandlerFunc{}            // method -> the parameter route's handler
	const shared = "/v1/inboxes/:inboxId/messages/:messageId"
	for id, h := range s.controlHandlers() {
		handlers[id] = h
	}
	for _, op := range schema.Operations() {
		if op.Control && !s.cfg.TestControls {
			continue // not_found, from the router, like any unknown path
		}
		var hf http.HandlerFunc
		if h, ok := handlers[op.ID]; ok {
			hf = s.adapt(op, h)
		} else {
			hf = absent(op, s.log) // in the contract but not built yet: say so plainly
		}
		hf = named(op.ID, hf)
		path := routerPath(op.Path)
		switch {
		case path == shared:
			byParam[op.Method] = hf
		case strings.HasPrefix(path, "/v1/inboxes/:inboxId/messages/") && strings.Count(path, "/") == strings.Count(shared, "/"):
			if literal[op.Method] == nil {
				literal[op.Method] = map[string]http.HandlerFunc{}
			}
			literal[op.Method][path[strings.LastIndex(path, "/")+1:]] = hf
		default:
			r.Handler(op.Method, path, hf)
		}
	}
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		lits, param := literal[method], byParam[method]
		if lits == nil && param == nil {
			continue
		}
		r.Handler(method, shared, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if h, ok := lits[httprouter.ParamsFromContext(req.Context()).ByName("messageId")]; ok {
				h(w, req)
				return
			}
			if param == nil {
				r.NotFound.ServeHTTP(w, req)
				return
			}
			param(w, req)
		}))
	}
	r.GET("/healthz", s.handleHealth)
	r.GET("/openapi.json", s.handleOpenAPI)
	r.GET("/metrics", s.handleMetrics)
	r.GET("/attachments/:inbox/:message/:attachment", s.handleDownload)
	// POST /mcp; every other method gets 405 with Allow: POST from the handler.
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		r.Handler(method, "/mcp", s.mcp)
	}
	s.dash.register(r) // the quarantine review dashboard, /dashboard/...
	return r
}

// headKey marks a HEAD request served by a GET route (asGet).
type headKey struct{}

// asGet lets a GET route serve a HEAD request, which httprouter answers only on routes
// registered for it: HEAD is GET without the body (RFC 9110 section 9.3.2). The handler
// runs as for GET, so the status and headers are GET's by construction (Content-Length
// included), and net/http drops the body it writes. A handler whose GET has an effect
// beyond its answer skips it when isHead.
func asGet(r *http.Request) *http.Request {
	get := r.WithContext(context.WithValue(r.Context(), headKey{}, true))
	get.Method = http.MethodGet
	return get
}

// isHead reports whether a request a GET route serves is a HEAD (asGet).
func isHead(r *http.Request) bool { return r.Context().Value(headKey{}) != nil }

// absent answers an operation of the contract that this build does not serve yet.
func absent(op schema.Operation, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeError(w, db.Errorf(db.ECodeNotFound, "%s is not available in this version of inboxd", op.ID), log)
	}
}

// routerPath turns "/v1/inboxes/{inboxId}" into httprouter's "/v1/inboxes/:inboxId".
func routerPath(p string) string {
	parts := strings.Split(p, "/")
	for i, seg := range parts {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			parts[i] = ":" + seg[1:len(seg)-1]
		}
	}
	return strings.Join(parts, "/")
}

// ServeHTTP routes on the raw path: "%2F" inside a Message-ID must stay inside its
// segment, so parameters are matched still encoded and decoded one by one afterwards.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	r2 := r.Clone(r.Context())
	r2.URL.Path = r.URL.EscapedPath()
	r2.URL.RawPath = ""
	s.router.ServeHTTP(rec, r2)
	d := time.Since(start)
	if rec.op == "" {
		rec.op = operationOf(r2.URL.Path, rec.status)
	}
	s.metrics.observeRequest(rec.op, rec.status, d)
	// One line per request; never a header (keys), the query (search terms, download
	// signatures) or a body.
	s.log.Info("request", "method", r.Method, "path", r.URL.EscapedPath(), "op", rec.op, "status", rec.status,
		"duration_ms", float64(d.Microseconds())/1000)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	op     string // the operation id (metrics.go), set by the route's handler
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "service": "inboxd"})
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	// Any origin may read the document, so that browser-hosted viewers and generators
	// (Swagger UI, Redocly, editors) load it by URL. It holds no secret and needs no key;
	// the API itself stays without CORS.
	h.Set("Access-Control-Allow-Origin", "*")
	w.Write(s.openapi)
}
