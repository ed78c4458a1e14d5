package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/schema"
	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

const benchInbox = "bench@inboxd.test"

// runGen fills a fresh database with n messages in one inbox, through the store's own
// delivery path (so every message is queued for indexing as in production).
func runGen(ctx context.Context, n int, dbPath string) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(dbPath + suffix)
	}
	os.RemoveAll(dbPath + ".index")
	store, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := db.EnsureAccount(ctx, store, db.Account{ID: "bench", Plan: db.PlanExempt}, nil); err != nil {
		return err
	}
	in, err := db.CreateInbox(ctx, store, db.NewInbox{AccountID: "bench", Address: benchInbox, DefaultDomain: "inboxd.test"})
	if err != nil {
		return err
	}
	c := newCorpus(1, 300)
	start := time.Now()
	var batch []db.NewMessage
	var bodies int64
	for i := 0; i < n; i++ {
		m := c.message(i, n, benchInbox)
		bodies += int64(len(m.body))
		nm := db.NewMessage{InboxID: in.ID, MessageID: fmt.Sprintf("<bench-%d@%s>", i, "inboxd.test"), Direction: db.Received,
			From: m.from.Addr, To: m.to, Subject: m.subject, Text: m.body, Preview: m.body[:80], Timestamp: m.ts,
			Labels: db.InitialLabels(db.Received, false, nil)}
		for _, a := range m.attachments {
			nm.Attachments = append(nm.Attachments, db.NewAttachment{Filename: a, ContentType: "application/pdf", Content: []byte("%PDF-1.4 bench")})
		}
		if m.category != "" {
			nm.Triage = &db.Triage{Status: db.TriageComplete, Version: 1, Model: "bench",
				Category: &db.TriageCategory{Value: m.category}, NeedsReply: &db.TriageNeedsReply{Value: m.needsReply},
				Urgency: &db.TriageUrgency{Value: &m.urgency}}
		}
		batch = append(batch, nm)
		if len(batch) == 1000 || i == n-1 {
			if _, err := db.Deliver(ctx, store, batch); err != nil {
				return err
			}
			batch = batch[:0]
			fmt.Fprintf(os.Stderr, "\rgenerated %d/%d", i+1, n)
		}
	}
	fmt.Fprintf(os.Stderr, "\n")
	fmt.Printf("generated %d messages in %.1fs; plain-text bodies %.1f MB\n", n, time.Since(start).Seconds(), float64(bodies)/1e6)
	return nil
}

// runHTTP serves the database the way inboxd serve does (store, indexer, API on a
// loopback port) and times searches end to end over HTTP, one client at a time.
func runHTTP(ctx context.Context, dbPath string, perKind int) error {
	var logTo io.Writer = io.Discard
	if os.Getenv("SEARCHBENCH_LOG") != "" {
		logTo = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	ix := search.NewIndexer(dbPath+".index", server.SearchSource(store), search.Options{Log: log})
	if err := ix.Start(ctx); err != nil {
		return err
	}
	defer ix.Close()
	v, err := schema.New()
	if err != nil {
		return err
	}
	svc := mail.NewService(mail.Config{Store: store, Domain: "inboxd.test", Log: log})
	api, err := server.New(store, svc, v, server.Config{BaseURL: "http://127.0.0.1", Domain: "inboxd.test", Search: ix}, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api}
	go srv.Serve(ln)
	defer srv.Close()
	token := db.GenerateAccountToken()
	exp := time.Now().Add(time.Hour)
	if err := db.CreateKey(ctx, store, db.NewKey{AccountID: "bench", Token: token, Scopes: db.AllScopes(), ExpiresAt: &exp}); err != nil {
		return err
	}
	base := "http://" + ln.Addr().String() + "/v1/inboxes/" + url.PathEscape(benchInbox) + "/messages/search?"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(q string) (int, error) {
		req, _ := http.NewRequest("GET", base+url.Values{"query": {q}}.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		var body struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if res.StatusCode != 200 {
			b, _ := io.ReadAll(res.Body)
			return 0, fmt.Errorf("%s: %d %s", q, res.StatusCode, b)
		}
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			return 0, err
		}
		return len(body.Messages), nil
	}
	// Wait until the index is ready (a rebuild on first start), then warm up.
	for i := 0; ; i++ {
		if _, err := get("warmup"); err == nil {
			break
		} else if i > 600 {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Queries use the vocabulary and senders of the generated mail (seed 1) and a random
	// stream of their own; phrases are cut from bodies in the database.
	c := newCorpus(1, 300)
	c.Rng = rand.New(rand.NewPCG(2, 2^0x9e3779b97f4a7c15))
	qs := c.queries(perKind)
	if qs["phrase"], err = bodyPhrases(ctx, store, c.Rng, perKind); err != nil {
		return err
	}
	for _, q := range qs["one"][:50] {
		get(q)
	}
	fmt.Printf("%-8s %5s %9s %9s %9s %9s  %s\n", "queries", "n", "p50", "p90", "p99", "max", "mean hits")
	for _, kind := range []string{"one", "two", "phrase", "rphrase", "from", "common"} {
		var lat []time.Duration
		hits := 0
		for _, q := range qs[kind] {
			t := time.Now()
			n, err := get(q)
			if err != nil {
				return err
			}
			lat = append(lat, time.Since(t))
			hits += n
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		pct := func(p int) string { return fmt.Sprintf("%.2fms", float64(lat[(len(lat)-1)*p/100].Microseconds())/1000) }
		fmt.Printf("%-8s %5d %9s %9s %9s %9s  %.1f\n", kind, len(lat), pct(50), pct(90), pct(99), pct(100), float64(hits)/float64(len(lat)))
	}
	return nil
}

// runSize prints the index size next to the size of the text it covers.
func runSize(ctx context.Context, dbPath string) error {
	store, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	n, err := store.CountIndexDocs(ctx)
	if err != nil {
		return err
	}
	var bodies int64
	for after := int64(0); ; {
		docs, err := store.ScanIndexDocs(ctx, after, 5000)
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			break
		}
		for _, d := range docs {
			bodies += int64(len(d.Body))
		}
		after = docs[len(docs)-1].ID
	}
	size := dirSize(dbPath + ".index")
	fmt.Printf("index %s: %.1f MB for %d messages whose plain-text bodies are %.1f MB (ratio %.2f)\n",
		filepath.Base(dbPath+".index"), float64(size)/1e6, n, float64(bodies)/1e6, float64(size)/float64(bodies))
	return nil
}

// bodyPhrases returns n phrases of 2-3 consecutive words (letters only) cut from the bodies
// of random messages of the database: phrases a person remembers from a message.
func bodyPhrases(ctx context.Context, store db.Store, rng *rand.Rand, n int) ([]string, error) {
	total, err := store.CountIndexDocs(ctx)
	if err != nil || total == 0 {
		return nil, err
	}
	isWord := func(w string) bool {
		for _, r := range w {
			if !unicode.IsLetter(r) {
				return false
			}
		}
		return w != ""
	}
	var out []string
	for len(out) < n {
		docs, err := store.IndexDocs(ctx, []int64{1 + rng.Int64N(total)})
		if err != nil {
			return nil, err
		}
		if len(docs) == 0 {
			continue
		}
		words := strings.Fields(strings.NewReplacer(".", " . ", ",", " , ", "\n", " . ").Replace(docs[0].Body))
		k := 2 + rng.IntN(2)
		for try := 0; try < 20; try++ {
			j := rng.IntN(max(1, len(words)-k))
			if j+k > len(words) {
				break
			}
			ok := true
			for _, w := range words[j : j+k] {
				ok = ok && isWord(w)
			}
			if ok {
				out = append(out, `"`+strings.ToLower(strings.Join(words[j:j+k], " "))+`"`)
				break
			}
		}
	}
	return out, nil
}
