package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/schema"
	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

const testDomain = "inboxd.test"

// env is one whole API server over its own temp database, with an account "acme" on the
// developer plan and keys of every kind, plus a second account "other".
type env struct {
	t      *testing.T
	dir    string // the temp dir of the database and its search index
	store  db.Store
	schema *schema.Validator
	svc    *mail.Service
	index  *search.Indexer // the running indexer; closed at the end of the test
	// configure, if set, adjusts the API server's configuration (newEnvWith).
	configure func(*server.Config)
	// source, if set, wraps the store as the search indexer reads it (startIndex).
	source   func(search.Source) search.Source
	api      *server.Server // the running API server (startIndex)
	url      string
	full     string // acme, every scope
	readOnly string // acme, inboxes:read + messages:read
	other    string // account "other", every scope
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv with configure applied to the API server's configuration.
func newEnvWith(t *testing.T, configure func(*server.Config)) *env {
	t.Helper()
	c := qt.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "inboxd.db"), sqlite.Options{})
	c.Assert(err, qt.IsNil)
	v, err := schema.New()
	c.Assert(err, qt.IsNil)
	log := slog.New(slog.DiscardHandler)
	e := &env{t: t, dir: dir, store: store, schema: v, svc: mail.NewService(store, testDomain, 0, log), configure: configure}
	workCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.svc.RunOutbound(workCtx); close(done) }()
	t.Cleanup(func() { // after the servers' own cleanups, which close them
		cancel()
		<-done
		if e.index != nil {
			qt.Check(t, e.index.Close(), qt.IsNil)
		}
		store.Close()
	})
	e.startIndex(search.Options{Log: log})
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "acme", Plan: "developer"}, nil), qt.IsNil)
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "other", Plan: "developer"}, nil), qt.IsNil)
	e.full = e.newKey("acme", db.AllScopes()...)
	e.readOnly = e.newKey("acme", db.ScopeInboxesRead, db.ScopeMessagesRead)
	e.other = e.newKey("other", db.AllScopes()...)
	return e
}

// indexPath is where the search index lives, beside the database.
func (e *env) indexPath() string { return filepath.Join(e.dir, "inboxd.db.index") }

// startIndex starts a search indexer on the index (a test that restarts it has closed
// the one before) and an API server over it; e.url is the new server's.
func (e *env) startIndex(opts search.Options) {
	e.t.Helper()
	src := server.SearchSource(e.store)
	if e.source != nil {
		src = e.source(src)
	}
	e.index = search.NewIndexer(e.indexPath(), src, opts)
	qt.Assert(e.t, e.index.Start(context.Background()), qt.IsNil)
	cfg := server.Config{BaseURL: "http://api.test", Domain: testDomain, Search: e.index}
	if e.configure != nil {
		e.configure(&cfg)
	}
	srv, err := server.New(e.store, e.svc, e.schema, cfg, slog.New(slog.DiscardHandler))
	qt.Assert(e.t, err, qt.IsNil)
	e.t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv)
	e.t.Cleanup(ts.Close)
	e.api, e.url = srv, ts.URL
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
