// Command inboxd serves the email API from one SQLite file.
//
//	inboxd serve   run the server
//	inboxd seed    load fixture files into a database
//	inboxd keys    create API keys
//	inboxd reindex rebuild the search index
//	inboxd migrate copy an SQLite database into an empty PostgreSQL one
//	inboxd mcp     serve the MCP tools over stdio, proxying to a running server
//	inboxd version print the version
//
// This file is wiring only: flags and environment become a Config, the packages are put
// together, and the program runs until SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/fixtures"
	"github.com/inboxd/inboxd/mail/events"
	"github.com/inboxd/inboxd/mail/webhook"
	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

// version and commitID are stamped at release time with -ldflags "-X main.version=...
// -X main.commitID=..."; without them the build's VCS stamp is used when there is one.
var (
	version  = "dev"
	commitID = ""
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runWith(ctx, os.Args[1:], os.Stdout, os.Stderr, runtimeTuning{on: true}); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "inboxd:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "inboxd:", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

const usage = `usage:
  inboxd serve --db DB --http ADDR --domain NAME --base-url URL [--data-dir DIR] [--seed FILE]... [--demo]
  inboxd seed --db DB [--domain NAME] FILE...
  inboxd keys create --db DB --account ID (--scopes LIST | --inbox ADDRESS) [--days N]
  inboxd keys list --db DB [--account ID]
  inboxd keys revoke --db DB KEYID
  inboxd accounts disable|enable --db DB ID
  inboxd backup --db PATH OUT   (SQLite; a PostgreSQL database: pg_dump)
  inboxd mcp --base-url URL   (with INBOXD_API_KEY; MCP over stdio)
  inboxd reindex --db DB [--data-dir DIR]
  inboxd migrate --from FILE --to postgres://...   (into an empty database)
  inboxd version
DB is an SQLite file (default inboxd.db) or postgres://user:pass@host:port/dbname?sslmode=...,
one database that several inboxd processes share, each with its own --data-dir.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWith(ctx, args, stdout, stderr, runtimeTuning{})
}

// runWith is run with the runtime settings of rt (runtime.go): on in the inboxd binary,
// off where a test runs a command in its own process.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, rt runtimeTuning) error {
	if len(args) == 0 {
		return usageError{usage}
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr, rt)
	case "seed":
		return runSeed(ctx, args[1:], stdout, stderr)
	case "keys":
		return runKeys(ctx, args[1:], stdout, stderr)
	case "accounts":
		return runAccounts(ctx, args[1:], stdout, stderr)
	case "reindex":
		return runReindex(ctx, args[1:], stdout, stderr, rt)
	case "migrate":
		return runMigrate(ctx, args[1:], stdout, stderr)
	case "backup":
		return runBackup(ctx, args[1:], stderr)
	case "mcp":
		return runMCP(ctx, args[1:], os.Stdin, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "inboxd %s (commit %s, SQLite %s)\n", version, commit(), sqlite.Version())
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q\n%s", args[0], usage)}
}

func commit() string {
	if commitID != "" {
		return commitID
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// newFlagSet returns a flag set whose flags also read INBOXD_<NAME> from the environment
// (applied by parseWithEnv), so systemd units and CI can configure by either.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseWithEnv parses args; a flag not given on the command line takes INBOXD_<NAME> when set.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "INBOXD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = usageError{fmt.Sprintf("%s: %v", env, e)}
			}
		}
	})
	return err
}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*m = append(*m, p)
		}
	}
	return nil
}

// byteSize is a flag of a number of bytes, plain or with a unit: 64MiB, 512KiB, 1GiB (also
// KB, MB, GB, read as the binary units; sizes of memory are meant).
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	num := strings.TrimRight(v, "KMGiBkmgib")
	unit := strings.ToLower(v[len(num):])
	shift, ok := map[string]uint{"": 0, "b": 0, "k": 10, "kb": 10, "kib": 10, "m": 20, "mb": 20, "mib": 20, "g": 30, "gb": 30, "gib": 30}[unit]
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if !ok || err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return fmt.Errorf("%q: want a size such as 64MiB", v)
	}
	*b = byteSize(n << shift)
	return nil
}

// Main is the running program: tests boot it whole on port 0 in a temp dir.
type Main struct {
	DBPath string // an SQLite file, or a postgres:// URL (dbopen.go)
	// DataDir holds the process's own files (search index, SMTP spool) when DBPath is a
	// URL; beside an SQLite file they are named after it.
	DataDir  string
	HTTPAddr string
	SMTPAddr string

	// SMTPMaxPerIP and SMTPMaxSession are the SMTP listener's fair-slot limits
	// (docs/smtp.md "Receiving"); zero takes its defaults.
	SMTPMaxPerIP   int
	SMTPMaxSession time.Duration

	// SMTP listener and outbound mail (docs/smtp.md): STARTTLS certificate, the relay URL
	// (empty: the sink, the test-double mode) and DKIM signing.
	TLSCert, TLSKey       string
	Relay                 string
	DKIMKey, DKIMSelector string
	Domain                string
	BaseURL               string
	Seeds                 []string
	Demo                  bool
	Stdout                io.Writer
	Log                   *slog.Logger
	// PProf is a loopback HOST:PORT serving Go's profiles (/debug/pprof/); "" is off.
	PProf string
	// MetricsToken, when set, is the bearer token GET /metrics needs (docs/operations.md
	// "Logs and metrics").
	MetricsToken string
	// MailBudget bounds the bytes of mail and request bodies processed at once
	// (docs/operations.md "Limits"); 0 is server.DefaultBudget.
	MailBudget int64
	// TrustedProxies are the addresses and CIDR prefixes of reverse proxies whose
	// X-Forwarded-For names the client (docs/protection.md).
	TrustedProxies []string
	// HTTPMaxConnections caps the open HTTP connections (0: the default); see
	// server.ConnLimit.
	HTTPMaxConnections int
	// TestControls serves the test controls under /_inboxd/ (docs/ci.md): no key
	// needed, so never on a server others can reach.
	TestControls bool

	// Protection of received mail and the quarantine review dashboard
	// (docs/protection.md): Protection is on (the default when empty) or off (no scan at
	// all); DNS is "" (the system resolver), "off" or HOST:PORT.
	Protection        string
	DNS, Spamd, Clamd string
	AdminPassword     string

	// Triage of received mail (docs/triage.md): builtin (the default when empty), llm or
	// off; for llm the OpenAI-compatible endpoint, its model and API key.
	Triage, TriageURL, TriageModel, TriageKey string

	store    db.Store
	local    string    // what the process's own files are named after (localBase)
	clock    *db.Clock // the store's clock, which the test controls move
	http     *http.Server
	api      *server.Server
	listener net.Listener
	cancel   context.CancelFunc
	done     chan struct{}
	smtp     *server.SMTP
	smtpLn   net.Listener
	smtpDone chan struct{}
	search   *search.Indexer

	triageDone chan struct{}
	pprofLn    net.Listener

	// WebhookAllowHTTP allows webhooks at http:// URLs of any host (docs/events.md "Webhooks").
	WebhookAllowHTTP bool
	webhooks         *webhook.Worker
	webhooksDone     chan struct{}
	hub              *events.Hub // the event log's follower, shared by the API and the webhook worker
	hubDone          chan struct{}

	// closers release what Run acquired: Run runs them when it fails part way, Close
	// once the server runs.
	closers closers
}

// closers is a list of release functions, run last first.
type closers []func() error

// add registers f and returns its place in the list, for handOff.
func (c *closers) add(f func() error) int {
	*c = append(*c, f)
	return len(*c) - 1
}

// handOff drops the closer at i: what it released now belongs to something that has
// its own closer (a listener to the server that serves it).
func (c *closers) handOff(i int) { (*c)[i] = func() error { return nil } }

// close runs every closer once, last first, and returns the first error.
func (c *closers) close() error {
	var err error
	for i := len(*c) - 1; i >= 0; i-- {
		if e := (*c)[i](); err == nil {
			err = e
		}
	}
	*c = nil
	return err
}

// ignoreErr adapts a release function whose error Close does not report.
func ignoreErr(f func() error) func() error { return func() error { f(); return nil } }

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, rt runtimeTuning) error {
	fs := newFlagSet("serve", stderr)
	m := &Main{Stdout: stdout}
	var seeds, proxies multiFlag
	fs.StringVar(&m.DBPath, "db", "inboxd.db", dbFlagHelp)
	fs.StringVar(&m.DataDir, "data-dir", "inboxd-data", dataDirFlagHelp)
	fs.StringVar(&m.HTTPAddr, "http", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&m.SMTPAddr, "smtp", "", "SMTP listen address for inbound mail, e.g. :25 (default: no SMTP listener)")
	fs.StringVar(&m.TLSCert, "tls-cert", "", "PEM certificate chain for SMTP STARTTLS")
	fs.StringVar(&m.TLSKey, "tls-key", "", "PEM private key for SMTP STARTTLS")
	fs.IntVar(&m.SMTPMaxPerIP, "smtp-max-per-ip", server.SMTPMaxPerAddress, "SMTP connections one client address (an IPv6 /64) may hold at once; more get 421")
	fs.DurationVar(&m.SMTPMaxSession, "smtp-max-session", server.SMTPMaxSession, "longest an SMTP connection may last (a message then in transfer may finish); then 421")
	fs.StringVar(&m.Relay, "relay", "", "outbound SMTP relay, smtp://user:pass@host:port (STARTTLS) or smtps://... (default: the sink, the test-double mode)")
	fs.StringVar(&m.DKIMKey, "dkim-key", "", "PEM private key (RSA or Ed25519) to DKIM-sign mail sent through the relay")
	fs.StringVar(&m.DKIMSelector, "dkim-selector", "", "DKIM selector published at <selector>._domainkey.<domain>")
	fs.StringVar(&m.Protection, "protection", "on", "scan received mail (SPF, DKIM, DMARC, spam, antivirus) and quarantine what fails: on, or off as the hosted service (no protection field, never quarantined)")
	fs.StringVar(&m.DNS, "dns", "", "DNS server for SPF, DKIM and DMARC checks, HOST:PORT, or off (default: the system resolver)")
	fs.StringVar(&m.Spamd, "spamd", "", "SpamAssassin spamd at HOST:PORT scores spam (default: the built-in rules)")
	fs.StringVar(&m.Clamd, "clamd", "", "ClamAV clamd at unix:PATH or tcp:HOST:PORT scans for malware too (default: the built-in scanner alone)")
	fs.StringVar(&m.Triage, "triage", "builtin", "triage of received mail: builtin (the embedded classifier), llm (needs --triage-url and --triage-model) or off")
	fs.StringVar(&m.TriageURL, "triage-url", "", "OpenAI-compatible API base URL for --triage llm, e.g. http://localhost:11434/v1")
	fs.StringVar(&m.TriageModel, "triage-model", "", "model name for --triage llm")
	fs.StringVar(&m.TriageKey, "triage-key", "", "API key for --triage llm; prefer INBOXD_TRIAGE_KEY (default: none)")
	fs.StringVar(&m.AdminPassword, "admin-password", "", "password of the review dashboard; prefer INBOXD_ADMIN_PASSWORD (default: generated and printed once at first start)")
	fs.StringVar(&m.Domain, "domain", "inboxd.test", "default domain of new inboxes")
	fs.StringVar(&m.BaseURL, "base-url", "", "public base URL (default http://<http address>)")
	fs.Var(&seeds, "seed", "fixture file to load at start (repeatable)")
	fs.BoolVar(&m.Demo, "demo", false, "load the bundled demo fixtures and print their keys")
	fs.BoolVar(&m.TestControls, "test-controls", false, "serve the test controls under /_inboxd/ for CI: reset, inject, outbox, faults, clock, keys, accounts; they need no key, so never on a reachable server")
	fs.StringVar(&m.MetricsToken, "metrics-token", "", "bearer token that GET /metrics requires; prefer INBOXD_METRICS_TOKEN (default: /metrics is open)")
	fs.IntVar(&m.HTTPMaxConnections, "http-max-connections", server.DefaultHTTPMaxConnections, "most HTTP connections open at once; at the cap the longest idle one is closed, else new clients wait (lowered to half the open-file limit)")
	fs.Var(&proxies, "trusted-proxy", "reverse proxy whose X-Forwarded-For names the client: IP addresses and CIDR prefixes, comma-separated or repeated (default: none; the peer is the client)")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	budget := byteSize(server.DefaultBudget)
	fs.Var(&budget, "mail-budget", "bytes of mail and request bodies processed at once; more waits, then gets SMTP 451 4.3.1 or HTTP 503 (default 48MiB)")
	fs.BoolVar(&m.WebhookAllowHTTP, "webhook-allow-http", false, "allow webhooks at http:// URLs of any host, for private networks (default: https://, or http:// to loopback only)")
	fs.StringVar(&m.PProf, "pprof", "", "serve Go's CPU and heap profiles at /debug/pprof/ on this loopback HOST:PORT (default: off)")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("serve: unexpected argument %q", fs.Arg(0))}
	}
	if m.AdminPassword != "" {
		// Checked here too so that a short one is a usage error before anything opens.
		if err := server.CheckOperatorPassword(m.AdminPassword); err != nil {
			return usageError{"--admin-password (or INBOXD_ADMIN_PASSWORD): " + err.Error()}
		}
	}
	if m.SMTPMaxPerIP < 1 {
		return usageError{fmt.Sprintf("--smtp-max-per-ip %d: use at least 1", m.SMTPMaxPerIP)}
	}
	if m.SMTPMaxSession <= 0 {
		return usageError{fmt.Sprintf("--smtp-max-session %v: use a positive duration, such as 10m", m.SMTPMaxSession)}
	}
	m.Seeds, m.TrustedProxies = seeds, proxies
	m.MailBudget = int64(budget)
	switch *logFormat {
	case "text":
		m.Log = slog.New(slog.NewTextHandler(stderr, nil))
	case "json":
		m.Log = slog.New(slog.NewJSONHandler(stderr, nil))
	default:
		return usageError{fmt.Sprintf("--log-format %q: use text or json", *logFormat)}
	}
	rt.serve()
	if err := m.Run(ctx); err != nil {
		if ctx.Err() != nil {
			// SIGTERM or SIGINT while starting (a long fixture load, say): a requested
			// stop, not a failure; Run has released what it acquired.
			fmt.Fprintf(stderr, "inboxd: stopped while starting (%v)\n", err)
			return nil
		}
		return err
	}
	go rt.limitMemoryOnceIndexed(ctx, m.search)
	<-ctx.Done()
	return m.Close()
}

// Run opens the database, loads fixtures, and starts serving; it returns once the server
// listens. Close stops it. When Run fails it has released what it acquired.
func (m *Main) Run(ctx context.Context) (err error) {
	m.fillDefaults()
	m.clock = &db.Clock{} // before the first part that reads time, the scanner
	p := &parts{}
	if err := m.checkFlags(p); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			m.closers.close() // the error that stopped Run is the one reported
		}
	}()
	for _, step := range []func(context.Context, *parts) error{
		m.readMailFlags,
		m.buildScanner,
		m.buildTriage,
		m.servePprof,
		// The listeners open before the database is touched: a port in use must not
		// leave a first start's one-time credentials created and printed for a server
		// that never ran.
		m.listen,
		m.openStore,
		m.loadFixtures,
		m.ensureOperator,
		m.prepareTestControls,
		m.buildMail,
		m.buildSMTP,
		m.openIndex,
		m.buildWebhooks,
		m.buildAPI,
	} {
		if err := step(ctx, p); err != nil {
			return err
		}
	}
	// Nothing fails from here.
	m.handOffListeners(p)
	m.startWorkers(p)
	m.serve(p)
	m.announce(p)
	return nil
}

// SMTPAddrListening is the address the SMTP listener listens on ("" without --smtp).
func (m *Main) SMTPAddrListening() string {
	if m.smtpLn == nil {
		return ""
	}
	return m.smtpLn.Addr().String()
}

// Addr is the address the HTTP server listens on.
func (m *Main) Addr() string { return m.listener.Addr().String() }

// Close drains in-flight requests (bounded), stops the workers and closes the search
// index, the database and the rest of what Run acquired, last first.
func (m *Main) Close() error { return m.closers.close() }

// defaultAccount is the account a fresh database gets.
const defaultAccount = "default"

func runSeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("seed", stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	domain := fs.String("domain", "inboxd.test", "default domain of the server the database is for")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"seed: name at least one fixture file"}
	}
	for _, f := range fs.Args() {
		// Before the database is opened: a mistyped file must not leave a new, empty one.
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	store, err := openDB(ctx, *path, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	results, err := fixtures.LoadFiles(ctx, store, fs.Args(), strings.ToLower(*domain))
	if err != nil {
		return err
	}
	for i, r := range results {
		fmt.Fprintf(stdout, "%s: %d accounts, %d inboxes, %d messages, %d keys\n", fs.Arg(i), r.Accounts, r.Inboxes, r.Messages, len(r.Keys))
	}
	return nil
}

// runBackup writes an online, consistent copy of the database; see sqlite.Store.Backup.
func runBackup(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlagSet("backup", stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"backup: name the output file: inboxd backup --db PATH OUT"}
	}
	if isDatabaseURL(*path) {
		return errPGBackup
	}
	if _, err := os.Stat(*path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	store, err := sqlite.Open(ctx, *path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	return store.Backup(ctx, fs.Arg(0))
}

// runMCP serves the MCP tools over stdio for desktop clients, proxying each call to the
// server at --base-url with the key in INBOXD_API_KEY (not a flag: command lines are
// visible to every user of the machine). stdout carries the protocol; logs go to stderr.
func runMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp", stderr)
	baseURL := fs.String("base-url", "http://127.0.0.1:8080", "base URL of the running inboxd server")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("mcp: unexpected argument %q", fs.Arg(0))}
	}
	key := strings.TrimSpace(os.Getenv("INBOXD_API_KEY"))
	if key == "" {
		return usageError{"mcp: set INBOXD_API_KEY to an API key (bze_... or gme_...)"}
	}
	return server.ServeMCPStdio(ctx, server.StdioConfig{
		BaseURL: *baseURL,
		Key:     key,
		Version: version,
		Log:     slog.New(slog.NewTextHandler(stderr, nil)),
	}, stdin, stdout)
}
