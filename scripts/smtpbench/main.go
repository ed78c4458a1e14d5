// Command smtpbench measures inboxd's mail throughput end to end: SMTP ingest of small
// messages (English-like text from benchkit's company mail, as scripts/bench sends) over
// concurrent connections, and API sends to a local inbox until every one is delivered.
// It starts the binary it is given on a fresh database in a temporary directory, with its
// defaults: parsing, protection (SPF, DKIM and DMARC against a local
// fake DNS, spam rules, antivirus), threading, the search index queue and the triage queue
// are all on. It creates the inboxes it needs through the API, runs both measurements and
// stops the server. With -from it starts from a copy of an existing database and index
// instead (the directory scripts/bench.sh --keep leaves), to see what a large mailbox
// store changes. With -search-loop the SMTP ingest runs a second time beside a client
// searching in a loop, the measurement of scripts/bench's second ingest, in a minute
// rather than the whole bench's five. With -pg it runs on a throwaway PostgreSQL cluster
// (scripts/pg-cluster.sh) instead of SQLite, with -procs N on N processes sharing it (the
// SMTP connections and the read clients dealt between them), and -reads D measures
// getMessage and listMessages over the ingested mail for D each; CPU time is reported per
// message and per request, PostgreSQL's apart (BENCHMARKS.md, issue 30).
//
//	go build -tags '...' -o /tmp/inboxd . && go run ./scripts/smtpbench -bin /tmp/inboxd
//
// scripts/smtpbench.sh does exactly that.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

func main() {
	benchkit.OwnRuntime() // the environment's GOGC, GOMEMLIMIT, GOMAXPROCS are the server's
	var o options
	flag.StringVar(&o.bin, "bin", "", "inboxd binary to start (required)")
	flag.IntVar(&o.n, "n", 20000, "messages to send over SMTP")
	flag.IntVar(&o.conns, "conns", 8, "concurrent SMTP connections")
	flag.IntVar(&o.size, "size", 2048, "approximate message size in bytes")
	flag.IntVar(&o.inboxes, "inboxes", 8, "recipient inboxes for the SMTP run")
	flag.IntVar(&o.sends, "sends", 1000, "API sends to a local inbox")
	flag.IntVar(&o.sendConc, "send-conc", 8, "concurrent API send requests")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (database, server log)")
	extra := flag.String("server-args", "", "extra arguments for inboxd serve, space separated (e.g. \"--triage off\"), to see what a part costs")
	flag.StringVar(&o.from, "from", "", "start from a copy of this directory's bench.db and bench.db.index (scripts/bench.sh --keep leaves one) instead of an empty database")
	flag.StringVar(&o.fromAccount, "from-account", "bench", "with -from: the account whose key the benchmark makes and whose inboxes it creates")
	flag.BoolVar(&o.searchLoop, "search-loop", false, "after the SMTP run, send as many messages again while one client searches the recipient inboxes in a loop")
	flag.BoolVar(&o.pg, "pg", false, "run on a throwaway PostgreSQL cluster (scripts/pg-cluster.sh, run from the repository's root) instead of SQLite")
	flag.IntVar(&o.procs, "procs", 1, "with -pg: inboxd processes sharing the database")
	flag.DurationVar(&o.reads, "reads", 0, "after the SMTP run, measure getMessage and listMessages for this long each (0: not)")
	flag.BoolVar(&o.pgStatements, "pg-statements", false, "with -pg: after each SMTP run, PostgreSQL's statements and transactions per message, its costliest statements and the backends' waits")
	flag.IntVar(&o.readClients, "read-clients", 8, "concurrent clients of -reads")
	flag.Parse()
	if o.bin == "" {
		fmt.Fprintln(os.Stderr, "smtpbench: -bin is required")
		os.Exit(2)
	}
	if o.procs < 1 || (o.procs > 1 || o.from != "") && o.pg == (o.from != "") {
		fmt.Fprintln(os.Stderr, "smtpbench: -procs above 1 needs -pg; -from needs SQLite")
		os.Exit(2)
	}
	o.extra = strings.Fields(*extra)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "smtpbench:", err)
		os.Exit(1)
	}
}

type options struct {
	bin                                      string
	extra                                    []string
	n, conns, size, inboxes, sends, sendConc int
	keep, searchLoop, pg, pgStatements       bool
	from, fromAccount                        string
	procs, readClients                       int
	reads                                    time.Duration
}

// startFrom copies a database and its index into dir and makes an API key for it: a
// server started on an existing database prints no key.
func startFrom(o options, dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(o.from, "bench.db")); err != nil {
		return "", fmt.Errorf("-from: %w", err)
	}
	// Without an index the server builds one; without the index's reader file the index
	// follows the change log under a new name, and the store keeps every row for the old one.
	for _, name := range []string{"bench.db", "bench.db.index", "bench.db.index.reader"} {
		if _, err := os.Stat(filepath.Join(o.from, name)); err != nil {
			continue
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(o.from, name), dir).CombinedOutput(); err != nil {
			return "", fmt.Errorf("copy %s: %v: %s", name, err, out)
		}
	}
	out, err := exec.Command(o.bin, "keys", "create", "--db", filepath.Join(dir, "bench.db"), "--account", o.fromAccount,
		"--scopes", "inboxes:read,inboxes:write,messages:read,messages:send,messages:write").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("keys create: %v: %s", err, out)
	}
	key := benchkit.KeyPattern.Find(out)
	if key == nil {
		return "", fmt.Errorf("keys create printed no key: %s", out)
	}
	return string(key), nil
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "smtpbench-")
	if err != nil {
		return err
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("working directory:", dir)
	}
	key := ""
	if o.from != "" {
		if key, err = startFrom(o, dir); err != nil {
			return err
		}
	}
	dns, stopDNS, err := benchkit.FakeDNS()
	if err != nil {
		return err
	}
	defer stopDNS()
	// Every benchmark connection comes from 127.0.0.1, one client to the listener's
	// per-address limit: allow it all of them (-server-args can still override).
	extra := append([]string{"--smtp-max-per-ip", strconv.Itoa(max(o.conns, 1))}, o.extra...)
	f := &fleet{db: filepath.Join(dir, "bench.db"), statements: o.pgStatements}
	if o.pg {
		stop, err := f.startCluster()
		if err != nil {
			return err
		}
		defer stop()
	}
	defer f.stop()
	if err := f.start(o, dir, dns, key, extra); err != nil {
		return err
	}
	srv := f.servers[0]

	ctx := context.Background()
	var rcpts []string
	for i := range o.inboxes {
		addr := fmt.Sprintf("in%d@inboxd.test", i)
		if err := srv.API.Do(ctx, "POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("in%d", i)}, nil); err != nil {
			return err
		}
		rcpts = append(rcpts, addr)
	}
	if o.n > 0 {
		if err := benchSMTP(ctx, f, rcpts, o.n, o.conns, o.size, false); err != nil {
			return err
		}
		if o.searchLoop {
			if err := benchSMTP(ctx, f, rcpts, o.n, o.conns, o.size, true); err != nil {
				return err
			}
		}
		if o.reads > 0 {
			if err := benchReads(ctx, f, rcpts, o.readClients, o.reads); err != nil {
				return err
			}
		}
	}
	if o.sends > 0 {
		if err := benchSends(ctx, srv.API, o.sends, o.sendConc); err != nil {
			return err
		}
	}
	return nil
}

// message returns a realistic message of about size bytes: a mail client's headers, a
// text body, and for one message in four a reply to an earlier one (threading work).
func message(i, size int, rcpt string, c *benchkit.Corpus) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Return-Path: <sender%d@%s>\r\n", i%300, benchkit.SenderDomain)
	id := fmt.Sprintf("bench-%d-%d", i, c.Rng.Int64())
	benchkit.WriteIngestHeader(&b, i, rcpt, c.Subject(), time.Now(), id,
		func(j int) string { return fmt.Sprintf("bench-%d", j) })
	benchkit.WriteWrapped(&b, size, c.Word)
	b.WriteString("\r\n")
	return b.Bytes()
}

// benchSMTP sends n messages over SMTP and reports the rate; with searching, one client
// searches the recipient inboxes in a loop meanwhile, as scripts/bench does beside its
// second ingest.
func benchSMTP(ctx context.Context, f *fleet, rcpts []string, n, conns, size int, searching bool) error {
	msgs := make([][]byte, n)
	to := make([]string, n)
	corpus := benchkit.CompanyMail(1)
	if searching {
		corpus = benchkit.CompanyMail(2) // other messages than the first run's
	}
	for i := range n {
		to[i] = rcpts[i%len(rcpts)]
		msgs[i] = message(i, size, to[i], corpus)
	}
	var stopSearches func() (string, error)
	if searching {
		stopSearches = startSearchLoop(ctx, f.servers[len(f.servers)-1].API, rcpts)
	}
	var watch *pgWatch
	if f.statements && f.pgPid != 0 {
		var err error
		if watch, err = watchPostgres(ctx, f.db); err != nil {
			return err
		}
	}
	before, err := f.usage()
	if err != nil {
		return err
	}
	res, err := benchkit.IngestTo(f.smtp(), msgs, to, conns, 0)
	searches, serr := "", error(nil)
	if searching {
		searches, serr = stopSearches()
	}
	if err != nil {
		return err
	}
	if serr != nil {
		return serr
	}
	if searching {
		fmt.Print("Beside a search loop, ")
	}
	fmt.Printf("SMTP ingest: %d messages of ~%d bytes over %d pipelined connections to %s in %.2f s = %.0f messages/s (latency p50 %.1f ms, p99 %.1f ms)\n",
		res.N, size, conns, f, res.Elapsed.Seconds(), res.Rate(), benchkit.Ms(res.P50), benchkit.Ms(res.P99))
	if searches != "" {
		fmt.Println("  " + searches)
	}
	// The work behind the acknowledgements (indexing, triage) counts too.
	if err := benchkit.Drain(ctx, 5*time.Minute, f.metrics()...); err != nil {
		return err
	}
	after, err := f.usage()
	if err != nil {
		return err
	}
	perMsg := func(v int64) float64 { return float64(v) / float64(res.N) }
	fmt.Printf("  server, per message until the index and triage queues were empty: %.0f us of CPU%s, %.0f KB written (%.0f KB reached storage); load average %s\n",
		perMsg((after.CPU - before.CPU).Microseconds()), f.pgShare(before, after, res.N), perMsg(after.Wrote-before.Wrote)/1000, perMsg(after.Stored-before.Stored)/1000, benchkit.LoadAvg())
	if watch != nil {
		return watch.report(ctx, res.N)
	}
	return nil
}

func benchSends(ctx context.Context, api *benchkit.API, sends, conc int) error {
	// The send limit is 250 per inbox in 24 h, so the sends come from several inboxes.
	// They are named apart from scripts/bench's, whose database -from may start from
	// with its senders' limits used up.
	var senders []string
	for i := range (sends + 199) / 200 {
		if err := api.Do(ctx, "POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("sends-from%d", i)}, nil); err != nil {
			return err
		}
		senders = append(senders, fmt.Sprintf("sends-from%d@inboxd.test", i))
	}
	if err := api.Do(ctx, "POST", "/v1/inboxes", map[string]any{"username": "sends-to"}, nil); err != nil {
		return err
	}
	res, err := api.Sends(ctx, senders, "sends-to@inboxd.test", "Hello from the benchmark. "+strings.Repeat("Some more words. ", 20), sends, conc)
	if err != nil {
		return err
	}
	fmt.Printf("API sends to a local inbox: %d sends (%d concurrent) accepted in %.2f s, all delivered into the inbox after %.2f s\n",
		sends, conc, res.Accepted.Seconds(), res.Delivered.Seconds())
	return nil
}

// startSearchLoop starts one client searching the inboxes in turn, one request at a time,
// for words of the messages' vocabulary; stop ends the loop and describes it.
func startSearchLoop(ctx context.Context, api *benchkit.API, inboxes []string) (stop func() (string, error)) {
	corpus := benchkit.CompanyMail(3)
	done, finished := make(chan struct{}), make(chan struct{})
	var lats []time.Duration
	var failed error
	go func() {
		defer close(finished)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			p := benchkit.InboxPath(inboxes[i%len(inboxes)]) + "/messages/search?query=" + url.QueryEscape(corpus.MidWord())
			t := time.Now()
			if failed = api.Do(ctx, "GET", p, nil, nil); failed != nil {
				return
			}
			lats = append(lats, time.Since(t))
		}
	}()
	return func() (string, error) {
		close(done)
		<-finished
		if failed != nil {
			return "", fmt.Errorf("search loop: %w", failed)
		}
		slices.Sort(lats)
		return fmt.Sprintf("%d searches beside it (p50 %.1f ms, p99 %.1f ms)", len(lats), benchkit.Ms(benchkit.Pct(lats, 50)), benchkit.Ms(benchkit.Pct(lats, 99))), nil
	}
}
