package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
	"github.com/inboxd/inboxd/db/postgres/pgtest"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/schema"
	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

const testDomain = "inboxd.test"

// testServer is one whole inboxd server over its own temp database, wired as main wires
// it: the store, the mail service with its outbound worker and, as serverOptions ask, the
// search indexer, the API server and the SMTP listener, all closed when the test ends.
// Every server test starts from newServer and adds the accounts it needs.
type testServer struct {
	t      testing.TB
	dir    string // the temp dir of the database and its search index
	opts   serverOptions
	store  db.Store
	schema *schema.Validator
	svc    *mail.Service
	log    *slog.Logger
	index  *search.Indexer // the running indexer (startIndex); closed at the end of the test
	api    *server.Server  // the running API server (startAPI)
	url    string          // its base URL
	smtp   *server.SMTP    // the SMTP listener, when serverOptions.smtp asks for one
	// smtpAddr is the SMTP listener's address.
	smtpAddr string
	// arrivals is shared by the SMTP listener and the API server, as main shares it.
	arrivals *server.Arrivals
}

// serverOptions vary a testServer. The zero value is the API server with a search index,
// without an SMTP listener, and a mail service that neither scans nor triages.
type serverOptions struct {
	now     func() time.Time                  // the store's clock (nil: time.Now)
	protect *protect.Config                   // scan received mail with this (nil: no scanner)
	mail    func(*mail.Config)                // adjusts the mail service's configuration
	api     func(*server.Config)              // adjusts the API server's configuration
	noAPI   bool                              // no API server at all
	noIndex bool                              // an API server without a search index
	origin  bool                              // the API's base URL is its own origin (the dashboard's forms)
	smtp    *server.SMTPConfig                // also an SMTP listener on loopback
	source  func(search.Source) search.Source // wraps the store as the indexer reads it
}

// newServer builds and starts the server opts describe, on an SQLite file, or, with
// INBOXD_TEST_STORE=postgres, on a PostgreSQL database of its own (db/postgres/pgtest):
// scripts/test.sh runs the whole suite on both stores.
func newServer(t testing.TB, opts serverOptions) *testServer {
	t.Helper()
	c := qt.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	var store db.Store
	var err error
	if os.Getenv("INBOXD_TEST_STORE") == "postgres" {
		store, err = postgres.Open(ctx, pgtest.NewDatabase(t), postgres.Options{Now: opts.now})
	} else {
		store, err = sqlite.Open(ctx, filepath.Join(dir, "inboxd.db"), sqlite.Options{Now: opts.now})
	}
	c.Assert(err, qt.IsNil)
	v, err := schema.New()
	c.Assert(err, qt.IsNil)
	log := slog.New(slog.DiscardHandler)
	mc := mail.Config{Store: store, Domain: testDomain, Log: log}
	if opts.protect != nil {
		mc.Protect, err = protect.New(*opts.protect)
		c.Assert(err, qt.IsNil)
	}
	if opts.mail != nil {
		opts.mail(&mc)
	}
	s := &testServer{t: t, dir: dir, opts: opts, store: store, schema: v, svc: mail.NewService(mc), log: log}
	workCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.svc.RunOutbound(workCtx); close(done) }()
	t.Cleanup(func() { // after the servers' own cleanups, which close them
		cancel()
		<-done
		if s.index != nil {
			qt.Check(t, s.index.Close(), qt.IsNil)
		}
		store.Close()
	})
	if opts.smtp != nil && !opts.noAPI {
		s.arrivals = server.NewArrivals() // searches yield to arriving mail, as in main
	}
	switch {
	case opts.noAPI:
	case opts.noIndex:
		s.startAPI(nil)
	default:
		s.startIndex(search.Options{Log: log})
	}
	if opts.smtp != nil {
		cfg := *opts.smtp
		cfg.Arrivals = s.arrivals
		s.smtp = server.NewSMTP(s.svc, cfg, log)
		s.smtpAddr = serveSMTP(t, s.smtp)
	}
	return s
}

// indexPath is where the search index lives, beside the database.
func (s *testServer) indexPath() string { return filepath.Join(s.dir, "inboxd.db.index") }

// startIndex starts a search indexer on the index (a test that restarts it has closed
// the one before) and an API server over it; s.url is the new server's.
func (s *testServer) startIndex(opts search.Options) {
	s.t.Helper()
	src := server.SearchSource(s.store)
	if s.opts.source != nil {
		src = s.opts.source(src)
	}
	s.index = search.NewIndexer(s.indexPath(), src, opts)
	qt.Assert(s.t, s.index.Start(context.Background()), qt.IsNil)
	s.startAPI(s.index)
}

// startAPI starts an API server searching ix (nil: without a search index); s.api and
// s.url become the new server's.
func (s *testServer) startAPI(ix *search.Indexer) {
	s.t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	cfg := server.Config{BaseURL: "http://api.test", Domain: testDomain, Search: ix, Arrivals: s.arrivals}
	if s.opts.origin {
		cfg.BaseURL = "http://" + ts.Listener.Addr().String()
	}
	if s.opts.api != nil {
		s.opts.api(&cfg)
	}
	srv, err := server.New(s.store, s.svc, s.schema, cfg, s.log)
	qt.Assert(s.t, err, qt.IsNil)
	s.t.Cleanup(srv.Close)
	ts.Config.Handler = srv
	ts.Start()
	s.t.Cleanup(ts.Close)
	s.api, s.url = srv, ts.URL
}

// serveSMTP serves sm on a loopback port until the test ends and returns its address.
func serveSMTP(t testing.TB, sm *server.SMTP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	done := make(chan struct{})
	go func() { sm.Serve(ln); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sm.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String()
}

// env is a testServer's API server with an account "acme" on the developer plan and
// keys of every kind, plus a second account "other".
type env struct {
	*testServer
	t        *testing.T
	full     string // acme, every scope
	readOnly string // acme, inboxes:read + messages:read
	other    string // account "other", every scope
}

func newEnv(t *testing.T) *env { return newEnvWith(t, serverOptions{}) }

// newEnvWith is newEnv on the server opts describe.
func newEnvWith(t *testing.T, opts serverOptions) *env {
	t.Helper()
	e := &env{testServer: newServer(t, opts), t: t}
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, e.store, db.Account{ID: "acme", Plan: "developer"}, nil), qt.IsNil)
	qt.Assert(t, db.EnsureAccount(ctx, e.store, db.Account{ID: "other", Plan: "developer"}, nil), qt.IsNil)
	e.full = e.newKey("acme", db.AllScopes()...)
	e.readOnly = e.newKey("acme", db.ScopeInboxesRead, db.ScopeMessagesRead)
	e.other = e.newKey("other", db.AllScopes()...)
	return e
}

func (e *env) newKey(account string, scopes ...string) string {
	token := db.GenerateAccountToken()
	exp := time.Now().Add(24 * time.Hour)
	qt.Assert(e.t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: account, Token: token, Scopes: scopes, ExpiresAt: &exp}), qt.IsNil)
	return token
}

func (e *env) mailboxKey(account, address string) string {
	in, err := e.store.InboxByAddress(context.Background(), account, address)
	qt.Assert(e.t, err, qt.IsNil)
	token := db.GenerateMailboxToken(in.UUID)
	qt.Assert(e.t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: account, Token: token, InboxAddress: address}), qt.IsNil)
	return token
}

// response is one HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	qt.Assert(t, json.Unmarshal(r.body, &m), qt.IsNil, qt.Commentf("body: %s", r.body))
	return m
}

// errCode returns the error code of an error response, checking its shape.
func (r response) errCode(t *testing.T) string {
	t.Helper()
	m := r.json(t)
	e, ok := m["error"].(map[string]any)
	qt.Assert(t, ok, qt.IsTrue, qt.Commentf("not an error body: %s", r.body))
	qt.Assert(t, e["message"], qt.Not(qt.Equals), "")
	_, ok = e["transient"].(bool)
	qt.Assert(t, ok, qt.IsTrue, qt.Commentf("transient missing: %s", r.body))
	code, _ := e["code"].(string)
	return code
}

// do sends a request. body may be nil, a string (sent as is) or a value (sent as JSON).
func (e *env) do(method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		qt.Assert(e.t, err, qt.IsNil)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	qt.Assert(e.t, err, qt.IsNil)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	qt.Assert(e.t, err, qt.IsNil)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	qt.Assert(e.t, err, qt.IsNil)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// ok sends a request that must succeed, checks the body against the operation's response
// schema (the one /openapi.json publishes), and decodes it.
func (e *env) ok(opID, method, path, key string, body any, headers ...string) map[string]any {
	e.t.Helper()
	r := e.do(method, path, key, body, headers...)
	qt.Assert(e.t, r.status, qt.Equals, http.StatusOK, qt.Commentf("%s %s: %s", method, path, r.body))
	qt.Assert(e.t, r.header.Get("Cache-Control"), qt.Equals, "no-store")
	qt.Assert(e.t, e.schema.Response(opID, r.body), qt.IsNil, qt.Commentf("%s response: %s", opID, r.body))
	var m map[string]any
	if string(bytes.TrimSpace(r.body)) != "null" {
		qt.Assert(e.t, json.Unmarshal(r.body, &m), qt.IsNil)
	}
	return m
}

// fails sends a request that must fail with status and code.
func (e *env) fails(status int, code, method, path, key string, body any, headers ...string) response {
	e.t.Helper()
	r := e.do(method, path, key, body, headers...)
	qt.Assert(e.t, r.status, qt.Equals, status, qt.Commentf("%s %s: %s", method, path, r.body))
	qt.Assert(e.t, r.errCode(e.t), qt.Equals, code)
	return r
}

// createInbox makes an inbox on the default domain and returns its address.
func (e *env) createInbox(username string) string {
	e.t.Helper()
	in := e.ok("createInbox", "POST", "/v1/inboxes", e.full, map[string]any{"username": username})
	return in["inboxId"].(string)
}

// inboxPath is the path of an inbox, with @ encoded as the spec says.
func inboxPath(addr string) string { return "/v1/inboxes/" + strings.ReplaceAll(addr, "@", "%40") }

// eventually polls cond for up to 5 s; delivery to local inboxes is asynchronous.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
