package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/schema"
)

// mcpHandler serves the hosted MCP server at POST /mcp (API-NOTES section 13): Streamable
// HTTP, stateless, with JSON responses, for account keys only.
type mcpHandler struct {
	s      *Server
	origin string // the origin of the public base URL, the only Origin accepted
	tools  []mcpTool
	caller *toolCaller
	sdk    *mcp.StreamableHTTPHandler

	mu      sync.Mutex
	servers map[string]*mcp.Server // by the key's scope set: each lists only the tools it allows
}

type principalKey struct{}

func (s *Server) newMCPHandler() (*mcpHandler, error) {
	tools, err := newMCPTools(s.schema)
	if err != nil {
		return nil, err
	}
	h := &mcpHandler{s: s, origin: originOf(s.cfg.BaseURL), tools: tools, servers: map[string]*mcp.Server{}}
	h.caller = &toolCaller{
		schema: s.schema,
		// The caller's own key, checked again by the REST operation it calls.
		auth: func(req *mcp.CallToolRequest) string {
			if req.Extra == nil {
				return ""
			}
			return req.Extra.Header.Get("Authorization")
		},
		do:  s.serveInProcess,
		log: s.log,
	}
	h.sdk = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: MaxBodyBytes,
		Logger:              s.log,
		// The SDK's own guard refuses a non-loopback Host on a loopback listener, which is
		// every deployment behind a reverse proxy on the same machine. A DNS-rebinding page
		// is refused by the Origin check below (browsers send Origin on every POST), and it
		// has no key to send.
		DisableLocalhostProtection: true,
	})
	return h, nil
}

// ServeHTTP checks what the SDK does not know about, in this order: the method (before
// authentication, as an unknown route is), the Origin, the key, the body size.
func (h *mcpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, db.Errorf(db.ECodeMethodNotAllowed, "/mcp accepts only POST (MCP Streamable HTTP, stateless)"), h.s.log)
		return
	}
	for _, o := range r.Header.Values("Origin") {
		if originOf(o) == "" || originOf(o) != h.origin {
			writeError(w, db.Errorf(db.ECodeForbidden, "Origin %q is not allowed; only %s may call /mcp from a browser", o, h.origin), h.s.log)
			return
		}
	}
	who, err := h.s.authenticate(r)
	if err != nil {
		writeError(w, err, h.s.log)
		return
	}
	if who.Mailbox {
		writeError(w, db.Errorf(db.ECodeUnauthorized, "hosted MCP needs an account key (bze_); a mailbox key works only with `inboxd mcp` on stdio"), h.s.log)
		return
	}
	body, release, err := h.s.readLimited(r)
	if err != nil {
		writeError(w, err, h.s.log)
		return
	}
	defer release()
	if err := plainJSON(r, ""); err != nil {
		writeError(w, err, h.s.log)
		return
	}
	if code, msg := jsonRPCProblem(body); code != 0 {
		writeJSONRPCError(w, code, msg)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), principalKey{}, who))
	r.Body = io.NopCloser(bytes.NewReader(body))
	longRequest(w, maxWait) // a call may be wait_for_message
	h.sdk.ServeHTTP(&noStoreWriter{ResponseWriter: w}, r)
}

// noStoreWriter keeps Cache-Control: no-store on every answer: the SDK sets its own
// "no-cache, no-transform" just before writing.
type noStoreWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *noStoreWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		w.Header().Set("Cache-Control", "no-store")
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *noStoreWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *noStoreWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if !w.wrote {
			w.WriteHeader(http.StatusOK)
		}
		f.Flush()
	}
}

func (w *noStoreWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// server returns the MCP server for the request's key: one per scope set, built once.
func (h *mcpHandler) server(r *http.Request) *mcp.Server {
	who, _ := r.Context().Value(principalKey{}).(*db.Principal)
	if who == nil {
		return nil
	}
	scopes := append([]string(nil), who.Scopes...)
	sort.Strings(scopes)
	key := strings.Join(scopes, " ")
	h.mu.Lock()
	defer h.mu.Unlock()
	srv := h.servers[key]
	if srv == nil {
		srv = newMCPServer(h.s.cfg.Version, h.tools, func(op schema.Operation) bool { return who.HasScope(op.Scope) }, h.caller)
		h.servers[key] = srv
	}
	return srv
}

// serveInProcess runs a REST request through the server's own handler, so a tool call
// takes exactly the path of the REST operation: routing, authentication, scopes, path
// decoding, validation, the handler and the one error writer.
func (s *Server) serveInProcess(r *http.Request) (int, []byte, error) {
	if r.Body == nil {
		r.Body = http.NoBody // as http.Server gives handlers; a client request may have none
	}
	rec := &responseRecorder{header: http.Header{}}
	s.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.status, rec.body.Bytes(), nil
}

type responseRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *responseRecorder) Header() http.Header { return r.header }

func (r *responseRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *responseRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// originOf returns the serialized origin of a URL (scheme://host[:port], lowercase, the
// default port left out), or "" when it has none.
func originOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}
