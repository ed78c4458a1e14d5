package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/fixtures"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/mail/triage"
	"github.com/inboxd/inboxd/schema"
	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

// The steps of Main.Run, in the order it takes them.

// parts are what Run's steps build for the steps after them.
type parts struct {
	proxies   []netip.Prefix // --trusted-proxy
	outbound  mail.OutboundConfig
	tls       *tls.Config // SMTP STARTTLS; nil: off
	scanner   *protect.Scanner
	analyzer  triage.Provider // nil: --triage off
	listeners []int           // the listeners' closers, handed to the servers once they serve
	schema    *schema.Validator
	svc       *mail.Service
	metrics   *server.Metrics  // shared by the HTTP API and the SMTP listener
	budget    *server.Budget   // likewise
	arrivals  *server.Arrivals // searches yield to mail arriving over SMTP; nil without it
	conns     *server.ConnLimit
	faults    *mail.Faults // the test controls' fault rules; nil without --test-controls
}

// fillDefaults gives what a test may leave unset its default.
func (m *Main) fillDefaults() {
	if m.Log == nil {
		m.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if m.Stdout == nil {
		m.Stdout = io.Discard
	}
	m.Domain = strings.ToLower(m.Domain)
}

// checkFlags refuses settings that cannot work, before anything is opened.
func (m *Main) checkFlags(p *parts) error {
	if !schema.ValidEmail("postmaster@" + m.Domain) {
		return usageError{fmt.Sprintf("--domain %q is not a domain name with a dotted label and a TLD", m.Domain)}
	}
	if m.BaseURL != "" {
		// It is the server URL of /openapi.json and the prefix of every download link.
		u, err := url.Parse(m.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return usageError{fmt.Sprintf("--base-url %q: want the public http:// or https:// URL of the server, such as https://mail.example.com", m.BaseURL)}
		}
	}
	proxies, err := server.ParseTrustedProxies(m.TrustedProxies)
	if err != nil {
		return usageError{"--trusted-proxy: " + err.Error()}
	}
	p.proxies = proxies
	if m.HTTPMaxConnections < 0 {
		return usageError{fmt.Sprintf("--http-max-connections %d: give a number of connections, at least 1", m.HTTPMaxConnections)}
	}
	return nil
}

// servePprof serves Go's profiles on --pprof, when given.
func (m *Main) servePprof(context.Context, *parts) (err error) {
	if m.PProf == "" {
		return nil
	}
	if m.pprofLn, err = startPprof(m.PProf); err != nil {
		return usageError{err.Error()}
	}
	m.closers.add(ignoreErr(m.pprofLn.Close))
	fmt.Fprintf(m.Stdout, "profiles at http://%s/debug/pprof/\n", m.pprofLn.Addr())
	return nil
}

// listen opens the HTTP listener, and the SMTP one with --smtp.
func (m *Main) listen(_ context.Context, p *parts) (err error) {
	if m.HTTPAddr == "" {
		return usageError{"--http: name the address to listen on, such as 127.0.0.1:8080 (an empty one would be every interface)"}
	}
	if m.listener, err = net.Listen("tcp", m.HTTPAddr); err != nil {
		return err
	}
	p.listeners = append(p.listeners, m.closers.add(m.listener.Close))
	if m.BaseURL == "" {
		m.BaseURL = "http://" + m.listener.Addr().String()
	}
	if m.SMTPAddr == "" {
		return nil
	}
	if m.smtpLn, err = net.Listen("tcp", m.SMTPAddr); err != nil {
		return err
	}
	p.listeners = append(p.listeners, m.closers.add(m.smtpLn.Close))
	return nil
}

// openStore opens the database, migrating its schema.
func (m *Main) openStore(ctx context.Context, _ *parts) (err error) {
	if m.local, err = localBase(m.DBPath, m.DataDir); err != nil {
		return err
	}
	if m.store, err = openDB(ctx, m.DBPath, m.clock.Now); err != nil {
		return err
	}
	m.closers.add(m.store.Close)
	return nil
}

// buildMail builds the request validator, the mail service and what the HTTP API and the
// SMTP listener share.
func (m *Main) buildMail(_ context.Context, p *parts) (err error) {
	if p.schema, err = schema.New(); err != nil {
		return err
	}
	mc := mail.Config{Store: m.store, Domain: m.Domain, Log: m.Log, Outbound: p.outbound, Protect: p.scanner, NoTriage: p.analyzer == nil,
		Faults: p.faults}
	if p.analyzer != nil {
		mc.TriageNow = p.analyzer.Inline() // the worker still takes mail released from quarantine
	}
	p.svc = mail.NewService(mc)
	p.metrics = server.NewMetrics()
	p.budget = server.NewBudget(m.MailBudget)
	return nil
}

// buildSMTP builds the SMTP listener's server, with --smtp.
func (m *Main) buildSMTP(_ context.Context, p *parts) error {
	if m.smtpLn == nil {
		return nil
	}
	p.arrivals = server.NewArrivals()
	m.smtp = server.NewSMTP(p.svc, server.SMTPConfig{Hostname: m.Domain, TLS: p.tls, Metrics: p.metrics, Faults: p.faults,
		MaxPerAddress: m.SMTPMaxPerIP, MaxSession: m.SMTPMaxSession, SpoolDir: m.local + ".spool", Budget: p.budget,
		Arrivals: p.arrivals}, m.Log)
	return nil
}

// openIndex starts the full-text search index: it lives beside the database and follows
// its queue.
func (m *Main) openIndex(ctx context.Context, _ *parts) error {
	m.search = search.NewIndexer(indexPath(m.local), server.SearchSource(m.store), search.Options{Log: m.Log})
	if err := m.search.Start(ctx); err != nil {
		return err
	}
	m.closers.add(m.search.Close)
	return nil
}

// buildAPI builds the HTTP API and its server.
func (m *Main) buildAPI(_ context.Context, p *parts) (err error) {
	p.conns = m.connLimit()
	m.api, err = server.New(m.store, p.svc, p.schema, server.Config{BaseURL: m.BaseURL, Domain: m.Domain, Version: version,
		Search: m.search, Metrics: p.metrics, MetricsToken: m.MetricsToken, Budget: p.budget, TrustedProxies: p.proxies,
		Conns: p.conns, SQLiteVersion: sqlite.Version(), Arrivals: p.arrivals, WebhookAllowHTTP: m.WebhookAllowHTTP, Webhooks: m.webhooks,
		Streams: server.StreamConfig{Hub: m.hub}, TestControls: m.TestControls, Clock: m.clock, Faults: p.faults}, m.Log)
	if err != nil {
		return err
	}

	m.http = &http.Server{
		Handler:           m.api,
		ConnState:         p.conns.ConnState,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20, // long query strings reach the validator and get a 422 naming the parameter
	}
	m.http.RegisterOnShutdown(m.api.EndStreams) // streams never finish on their own
	return nil
}

// handOffListeners gives the listeners to the servers (their Shutdown closes them), and
// has Close run stopServing first: it drains them and stops the workers.
func (m *Main) handOffListeners(p *parts) {
	for _, i := range p.listeners {
		m.closers.handOff(i)
	}
	m.closers.add(m.stopServing)
}

// startWorkers starts outbound delivery and, unless --triage off, the triage worker.
func (m *Main) startWorkers(p *parts) {
	workCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.done = make(chan struct{}, 2)
	go func() { p.svc.RunOutbound(workCtx); m.done <- struct{}{} }()
	m.startWebhooks(workCtx)
	if p.analyzer != nil {
		m.triageDone = make(chan struct{})
		w := &triage.Worker{Store: m.store, Provider: p.analyzer, Log: m.Log}
		go func() { w.Run(workCtx); close(m.triageDone) }()
	}
}

// serve starts the HTTP server and, with --smtp, the SMTP listener.
func (m *Main) serve(p *parts) {
	go func() {
		if err := m.http.Serve(p.conns.Listener(m.listener)); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Log.Error("http server stopped", "err", err)
		}
		m.done <- struct{}{}
	}()
	if m.smtp == nil {
		return
	}
	m.smtpDone = make(chan struct{})
	go func() {
		if err := m.smtp.Serve(m.smtpLn); err != nil {
			m.Log.Error("smtp server stopped", "err", err)
		}
		close(m.smtpDone)
	}()
}

// announce prints where the server listens.
func (m *Main) announce(p *parts) {
	fmt.Fprintf(m.Stdout, "inboxd %s listening on %s (API base %s, domain %s, database %s)\n", version, m.listener.Addr(), m.BaseURL, m.Domain, describeDB(m.DBPath))
	if m.smtp != nil {
		fmt.Fprintf(m.Stdout, "SMTP listening on %s (STARTTLS %s)\n", m.smtpLn.Addr(), map[bool]string{true: "on", false: "off"}[p.tls != nil])
	}
}

// readMailFlags reads the flags of outbound mail and of the SMTP listener's STARTTLS.
func (m *Main) readMailFlags(_ context.Context, p *parts) error {
	out, tlsConfig, err := m.mailFlags()
	p.outbound, p.tls = out, tlsConfig
	return err
}

// mailFlags is readMailFlags' reading.
func (m *Main) mailFlags() (mail.OutboundConfig, *tls.Config, error) {
	var out mail.OutboundConfig
	if m.Relay != "" {
		r, err := mail.ParseRelay(m.Relay, m.Domain)
		if err != nil {
			return out, nil, usageError{"--relay: " + err.Error()}
		}
		out.Transport = r
		m.closers.add(ignoreErr(r.Close))
		m.Log.Info("outbound mail goes through the relay", "relay", r.String())
	} else {
		m.Log.Info("no --relay: mail to recipients outside this server is recorded delivered with provider sink and not sent (the test-double mode)")
	}
	if (m.DKIMKey == "") != (m.DKIMSelector == "") {
		return out, nil, usageError{"--dkim-key and --dkim-selector go together"}
	}
	if m.DKIMKey != "" {
		d, err := mail.LoadDKIM(m.DKIMKey, m.DKIMSelector)
		if err != nil {
			return out, nil, usageError{"--dkim-key: " + err.Error()}
		}
		out.DKIM = d
		// Mail is signed for the domain of its From: the record goes under each domain mail
		// is sent from; the log names the default one.
		m.Log.Info("DKIM signing of relayed mail", "selector", d.Selector,
			"dns", d.Selector+"._domainkey."+m.Domain+". TXT "+d.DNSRecord(), "also", "the same record under every other domain mail is sent from")
	}
	if (m.TLSCert == "") != (m.TLSKey == "") {
		return out, nil, usageError{"--tls-cert and --tls-key go together"}
	}
	if m.TLSCert != "" && m.SMTPAddr == "" {
		return out, nil, usageError{"--tls-cert and --tls-key are for SMTP STARTTLS: give --smtp too"}
	}
	if m.TLSCert == "" {
		return out, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(m.TLSCert, m.TLSKey)
	if err != nil {
		return out, nil, usageError{"--tls-cert/--tls-key: " + err.Error()}
	}
	return out, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// buildTriage builds the triage provider of --triage, or none for off.
func (m *Main) buildTriage(_ context.Context, p *parts) (err error) {
	p.analyzer, err = m.triageProvider()
	return err
}

// triageProvider is the provider of --triage, or nil for off.
func (m *Main) triageProvider() (triage.Provider, error) {
	if m.Triage != "llm" && (m.TriageURL != "" || m.TriageModel != "" || m.TriageKey != "") {
		return nil, usageError{"--triage-url, --triage-model and --triage-key need --triage llm"}
	}
	switch m.Triage {
	case "", "builtin":
		return triage.NewBuiltin()
	case "llm":
		if m.TriageURL == "" || m.TriageModel == "" {
			return nil, usageError{"--triage llm needs --triage-url and --triage-model"}
		}
		p, err := triage.NewLLM(m.TriageURL, m.TriageModel, m.TriageKey, nil)
		if err != nil {
			return nil, usageError{err.Error()}
		}
		m.Log.Info("triage through an LLM endpoint", "model", m.TriageModel)
		return p, nil
	case "off":
		m.Log.Info("triage is off: received mail carries no triage")
		return nil, nil
	}
	return nil, usageError{fmt.Sprintf("--triage %q: use builtin, llm or off", m.Triage)}
}

// buildScanner builds the scanner that gives received mail its protection verdict.
func (m *Main) buildScanner(_ context.Context, p *parts) (err error) {
	p.scanner, err = m.protectConfig()
	return err
}

// protectConfig is the scanner of the protection flags.
func (m *Main) protectConfig() (*protect.Scanner, error) {
	switch m.Protection {
	case "", "on":
	case "off":
		// As the hosted service, which does not scan yet (extensions section 7).
		m.Log.Info("--protection off: received mail is not scanned, carries no protection verdict and is never quarantined")
		return nil, nil
	default:
		return nil, usageError{fmt.Sprintf("--protection %q: use on or off", m.Protection)}
	}
	cfg := protect.Config{Spamd: m.Spamd, Clamd: m.Clamd, Now: m.clock.Now}
	switch m.DNS {
	case "":
		cfg.Resolver = protect.SystemResolver()
	case "off":
		m.Log.Info("--dns off: SPF, DKIM and DMARC are not checked (results unavailable)")
	default:
		r, err := protect.ServerResolver(m.DNS)
		if err != nil {
			return nil, usageError{"--dns: " + err.Error()}
		}
		cfg.Resolver = r
	}
	s, err := protect.New(cfg)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return s, nil
}

// connLimit is the HTTP connection cap of --http-max-connections, lowered to what the
// open-file limit allows.
func (m *Main) connLimit() *server.ConnLimit {
	want := cmp.Or(m.HTTPMaxConnections, server.DefaultHTTPMaxConnections)
	limit, lowered := server.FitHTTPMaxConnections(want, openFileLimit())
	if lowered {
		m.Log.Warn("HTTP connection cap lowered to half the open-file limit (raise LimitNOFILE to allow more)",
			"asked", want, "cap", limit, "nofile", openFileLimit())
	}
	return server.NewConnLimit(limit)
}

// ensureOperator makes sure the review dashboard has a password, printing a generated one
// once.
func (m *Main) ensureOperator(ctx context.Context, _ *parts) error {
	generated, err := server.EnsureOperatorPassword(ctx, m.store, m.AdminPassword)
	if err != nil {
		return err
	}
	switch {
	case generated != "":
		fmt.Fprintf(m.Stdout, "review dashboard: operator %q, password (shown once, stored hashed): %s\n", server.Operator, generated)
	case m.AdminPassword == "":
		// A later start cannot show the password (only its hash is kept); say where it came
		// from and how to replace it, so an operator who lost it is not stuck.
		fmt.Fprintf(m.Stdout, "review dashboard: operator %q, the password printed at the first start; to set another, start with INBOXD_ADMIN_PASSWORD\n", server.Operator)
	}
	return nil
}

// stopServing drains in-flight HTTP requests and SMTP sessions (bounded) and stops the
// workers.
func (m *Main) stopServing() error {
	start := time.Now()
	m.Log.Info("stopping: draining HTTP requests and SMTP sessions, then the workers")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := m.drain(ctx)
	// An operator reading the log after a restart sees that the stop was clean, or that
	// the bound cut some requests or sessions short.
	m.Log.Info("stopped", "duration_ms", time.Since(start).Milliseconds(), "drained", err == nil)
	return err
}

// drain stops the listeners, waits for in-flight HTTP requests and SMTP sessions until
// ctx ends, and stops the workers.
func (m *Main) drain(ctx context.Context) error {
	err := m.http.Shutdown(ctx)
	if m.smtp != nil {
		// Sessions inside DATA finish and get their answer; idle ones are closed.
		if e := m.smtp.Shutdown(ctx); err == nil {
			err = e
		}
		<-m.smtpDone
	}
	m.api.Close()
	m.cancel()
	<-m.done
	<-m.done
	if m.triageDone != nil {
		<-m.triageDone
	}
	m.waitWebhooks()
	return err
}

// loadFixtures loads the requested fixtures, then makes sure a fresh database has an account to
// use: on an empty database a default account is created and its key printed once.
func (m *Main) loadFixtures(ctx context.Context, _ *parts) error {
	var results []*fixtures.Result
	if len(m.Seeds) > 0 {
		rs, err := fixtures.LoadFiles(ctx, m.store, m.Seeds, m.Domain)
		if err != nil {
			return err
		}
		results = rs
	}
	if m.Demo {
		r, err := fixtures.LoadDemo(ctx, m.store, m.Domain)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	for _, r := range results {
		for _, k := range r.Keys {
			if k.Inbox != "" {
				fmt.Fprintf(m.Stdout, "mailbox key for %s (account %s): %s\n", k.Inbox, k.Account, k.Token)
			} else {
				fmt.Fprintf(m.Stdout, "account key for %s [%s]: %s\n", k.Account, strings.Join(k.Scopes, " "), k.Token)
			}
		}
	}
	n, err := m.store.CountAccounts(ctx)
	if err != nil || n > 0 {
		return err
	}
	if err := db.EnsureAccount(ctx, m.store, db.Account{ID: defaultAccount, Plan: db.PlanExempt}, nil); err != nil {
		return err
	}
	token := db.GenerateAccountToken()
	expires := m.store.Now().AddDate(0, 0, db.MaxKeyDays)
	if err := db.CreateKey(ctx, m.store, db.NewKey{AccountID: defaultAccount, Token: token, Scopes: db.AllScopes(), ExpiresAt: &expires}); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "created account %q; its full-scope key (shown once, valid until %s):\n%s\n", defaultAccount, expires.Format(time.DateOnly), token)
	return nil
}
