package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

// searchEnv is the API server of newEnv with an inbox to search in.
type searchEnv struct {
	*env
	inbox *db.Inbox
	n     int
}

func newSearchEnv(t *testing.T) *searchEnv {
	t.Helper()
	e := &searchEnv{env: newEnv(t)}
	in, err := e.store.InboxByAddress(context.Background(), "acme", e.createInbox("search"))
	qt.Assert(t, err, qt.IsNil)
	e.inbox = in
	return e
}

// deliver stores received messages in the test inbox, one second apart, newest last.
func (e *searchEnv) deliver(msgs ...db.NewMessage) []db.Stored {
	e.t.Helper()
	return e.deliverTo(e.inbox, msgs...)
}

// deliverTo is deliver to another inbox.
func (e *searchEnv) deliverTo(in *db.Inbox, msgs ...db.NewMessage) []db.Stored {
	e.t.Helper()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range msgs {
		m := &msgs[i]
		e.n++
		m.InboxID = in.ID
		if m.MessageID == "" {
			m.MessageID = fmt.Sprintf("<m%d@test>", e.n)
		}
		m.Direction = db.Received
		if m.From == "" {
			m.From = "someone@example.org"
		}
		if m.To == nil {
			m.To = []string{in.Address}
		}
		if m.Timestamp.IsZero() {
			m.Timestamp = base.Add(time.Duration(e.n) * time.Second)
		}
		m.Labels = db.InitialLabels(db.Received, m.Protection != nil && m.Protection.Status == db.ProtectionQuarantined, m.Labels)
	}
	st, err := db.Deliver(context.Background(), e.store, msgs)
	qt.Assert(e.t, err, qt.IsNil)
	return st
}

// search runs a search and returns the subjects found and the next page token.
func (e *searchEnv) search(q string, extra ...string) ([]string, string) {
	e.t.Helper()
	v := url.Values{"query": {q}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	res := e.ok("searchMessages", "GET", searchPath(e.inbox.Address, v), e.full, nil)
	next, _ := res["nextPageToken"].(string)
	return subjectsOf(res), next
}

func searchPath(address string, v url.Values) string {
	return inboxPath(address) + "/messages/search?" + v.Encode()
}

// subjectsOf lists the subjects of a page of messages.
func subjectsOf(page map[string]any) []string {
	subjects := []string{}
	for _, m := range page["messages"].([]any) {
		subjects = append(subjects, m.(map[string]any)["subject"].(string))
	}
	return subjects
}

func TestSearchRanksSubjectAboveBody(t *testing.T) {
	e := newSearchEnv(t)
	e.deliver(
		db.NewMessage{Subject: "Lunch plans", Text: "The invoice is attached, the invoice for March."},
		db.NewMessage{Subject: "Invoice for March", Text: "See the attachment."},
		db.NewMessage{Subject: "Hello", Text: "Nothing to see.", From: "invoice@billing.example"},
		db.NewMessage{Subject: "Unrelated", Text: "Nothing here either."},
	)
	got, next := e.search("INVOICE")
	qt.Assert(t, got, qt.DeepEquals, []string{"Invoice for March", "Hello", "Lunch plans"})
	qt.Assert(t, next, qt.Equals, "")
}

// While mail is being received over SMTP, a search runs on the threads of lower CPU
// priority (priority.go); otherwise on the request's own.
func TestSearchYieldsToArrivingMail(t *testing.T) {
	var e *searchEnv
	var during []string
	triageNow := func(*db.NewMessage, time.Time) *db.Triage { // runs inside Receive
		during, _ = e.search("invoice")
		return nil
	}
	e = &searchEnv{env: newEnvWith(t, serverOptions{smtp: &server.SMTPConfig{},
		mail: func(c *mail.Config) { c.TriageNow = triageNow }})}
	in, err := e.store.InboxByAddress(context.Background(), "acme", e.createInbox("search"))
	qt.Assert(t, err, qt.IsNil)
	e.inbox = in
	e.deliver(db.NewMessage{Subject: "Invoice for March", Text: "See the attachment."})
	before := e.api.LowPriorityRuns()
	got, _ := e.search("invoice")
	qt.Assert(t, got, qt.DeepEquals, []string{"Invoice for March"})
	qt.Assert(t, e.api.LowPriorityRuns(), qt.Equals, before)

	raw := "From: a@example.org\r\nTo: " + e.inbox.Address + "\r\nSubject: Hi\r\nMessage-ID: <arriving@test>\r\n\r\nHello.\r\n"
	qt.Assert(t, smtp.SendMail(e.smtpAddr, nil, "a@example.org", []string{e.inbox.Address}, []byte(raw)), qt.IsNil)
	qt.Assert(t, during, qt.DeepEquals, []string{"Invoice for March"})
	qt.Assert(t, e.api.LowPriorityRuns(), qt.Equals, before+1)
	e.search("invoice") // the message has arrived
	qt.Assert(t, e.api.LowPriorityRuns(), qt.Equals, before+1)
}

func TestSearchQueryLanguage(t *testing.T) {
	e := newSearchEnv(t)
	e.deliver(
		db.NewMessage{Subject: "Weekly report", Text: "The red apple fell.", From: "alice.smith@mail.acme.com",
			Attachments: []db.NewAttachment{{Filename: "figures-q3.pdf", ContentType: "application/pdf", Content: []byte("%PDF")}},
			Timestamp:   time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC)},
		db.NewMessage{Subject: "Re: weekly report", Text: "An apple, red and ripe.", From: "bob@globex.io", Cc: []string{"carol@acme.com"},
			Timestamp: time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)},
		db.NewMessage{Subject: "Newsletter", Text: "Apples and pears, the weekly digest.", From: "news@letters.example",
			Timestamp: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)},
	)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"report", []string{"Re: weekly report", "Weekly report"}},
		{"weekly -newsletter", []string{"Re: weekly report", "Weekly report"}},
		{`"red apple"`, []string{"Weekly report"}},
		{`"apple red"`, []string{"Re: weekly report"}},
		{`-"red apple" apple`, []string{"Re: weekly report"}},
		{`"red apple`, []string{"Weekly report"}},
		{"pears OR ripe", []string{"Newsletter", "Re: weekly report"}},
		{"WEEKLY Report", []string{"Re: weekly report", "Weekly report"}},
		{"from:alice.smith@mail.acme.com", []string{"Weekly report"}},
		{"acme.com", []string{"Re: weekly report", "Weekly report"}},
		{"from:acme.com", []string{"Weekly report"}},
		{"to:carol", []string{"Re: weekly report"}},
		{`subject:"weekly report"`, []string{"Re: weekly report", "Weekly report"}},
		{"subject:apple", []string{}},
		{"has:attachment", []string{"Weekly report"}},
		{"figures-q3.pdf", []string{"Weekly report"}},
		{"before:2026-01-01", []string{"Weekly report"}},
		{"after:2026-01-01 report", []string{"Re: weekly report"}},
		{"after:2026-01-02", []string{"Newsletter"}},
		{"weekly after:bogus", []string{}},
		{"- -- OR", []string{}},
		{"!!!", []string{}},
		{"-newsletter", []string{"Re: weekly report", "Weekly report"}},
	} {
		// Which messages match; the order is the ranking tests' business.
		got, _ := e.search(tc.q)
		sort.Strings(got)
		qt.Check(t, got, qt.DeepEquals, tc.want, qt.Commentf("query %s", tc.q))
	}
}

func TestSearchFilters(t *testing.T) {
	e := newSearchEnv(t)
	complete := func(cat string, reply bool, urg string) *db.Triage {
		u := urg
		zero, no := int64(0), false
		return &db.Triage{Status: db.TriageComplete, Version: 1, Model: "m", AnalyzedAt: "2026-03-01T12:00:00.000Z",
			DurationMs: &zero, BodyTruncated: &no, Usage: &db.TriageUsage{},
			Category:   &db.TriageCategory{Value: cat, Probabilities: map[string]float64{"billing": 0, "support": 0, "sales": 0, "personal": 0, "notification": 0, "other": 0}},
			NeedsReply: &db.TriageNeedsReply{Value: &reply},
			Urgency:    &db.TriageUrgency{Value: &u, Probabilities: map[string]float64{"0": 0, "1": 0, "2": 0, "3": 0}}}
	}
	e.deliver(
		db.NewMessage{Subject: "Card declined", Text: "payment failed", Triage: complete("billing", true, "high")},
		db.NewMessage{Subject: "Receipt", Text: "payment received", Triage: complete("billing", false, "low")},
		db.NewMessage{Subject: "Question", Text: "payment options?", Triage: complete("sales", true, "high")},
		db.NewMessage{Subject: "Pending", Text: "payment pending", Triage: &db.Triage{Status: db.TriagePending}},
	)
	got, _ := e.search("payment", "category", "billing")
	qt.Assert(t, got, qt.DeepEquals, []string{"Receipt", "Card declined"})
	got, _ = e.search("payment", "needsReply", "yes", "urgency", "high")
	qt.Assert(t, got, qt.DeepEquals, []string{"Question", "Card declined"})
	got, _ = e.search("payment", "category", "billing", "needsReply", "no")
	qt.Assert(t, got, qt.DeepEquals, []string{"Receipt"})
	got, _ = e.search("payment", "urgency", "critical")
	qt.Assert(t, got, qt.DeepEquals, []string{})
}

func TestSearchPaging(t *testing.T) {
	e := newSearchEnv(t)
	var msgs []db.NewMessage
	for i := 0; i < 23; i++ {
		// Scores differ (subject or body, one or more hits) and tie, so the order uses
		// every key: relevance, then time, then id.
		text := "status update"
		if i%3 == 0 {
			text = "status update: status is green"
		}
		subject := fmt.Sprintf("Note %02d", i)
		if i%5 == 0 {
			subject = fmt.Sprintf("Status %02d", i)
		}
		ts := time.Date(2026, 2, 1, 0, 0, i%4, 0, time.UTC) // many share a timestamp
		msgs = append(msgs, db.NewMessage{Subject: subject, Text: text, Timestamp: ts})
	}
	e.deliver(msgs...)
	all, next := e.search("status", "limit", "100")
	qt.Assert(t, all, qt.HasLen, 23)
	qt.Assert(t, next, qt.Equals, "")
	qt.Assert(t, all[0][:6], qt.Equals, "Status") // subject hits first

	var paged []string
	token := ""
	for page := 0; ; page++ {
		qt.Assert(t, page < 10, qt.IsTrue)
		args := []string{"limit", "7"}
		if token != "" {
			args = append(args, "pageToken", token)
		}
		got, next := e.search("status", args...)
		qt.Assert(t, len(next) <= 200, qt.IsTrue)
		paged = append(paged, got...)
		if next == "" {
			break
		}
		token = next
	}
	qt.Assert(t, paged, qt.DeepEquals, all) // no gaps, no repeats, same order

	// The token belongs to its query and inbox; a forged one is refused naming pageToken.
	_, next = e.search("status", "limit", "7")
	path := inboxPath(e.inbox.Address) + "/messages/search?"
	r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", path+url.Values{"query": {"update"}, "pageToken": {next}}.Encode(), e.full, nil)
	qt.Assert(t, string(r.body), qt.Contains, "pageToken")
	// Two characters changed, whatever they were (a fixed "AA" was the real ending once in
	// 4,096 tokens).
	forged := next[:len(next)-2] + map[bool]string{true: "BB", false: "AA"}[strings.HasSuffix(next, "AA")]
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", path+url.Values{"query": {"status"}, "pageToken": {forged}}.Encode(), e.full, nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", path+url.Values{"query": {"status"}, "pageToken": {"20"}}.Encode(), e.full, nil)
}

func TestSearchNeverFindsTrashOrQuarantine(t *testing.T) {
	e := newSearchEnv(t)
	st := e.deliver(
		db.NewMessage{Subject: "Secret plan", Text: "kept"},
		db.NewMessage{Subject: "Secret malware", Text: "held", Protection: &db.Protection{Status: db.ProtectionQuarantined}},
	)
	got, _ := e.search("secret")
	qt.Assert(t, got, qt.DeepEquals, []string{"Secret plan"})

	labels := inboxPath(e.inbox.Address) + "/messages/" + url.PathEscape(st[0].MessageID) + "/labels"
	e.ok("updateMessageLabels", "PATCH", labels, e.full, map[string]any{"addLabels": []string{"trash"}})
	got, _ = e.search("secret")
	qt.Assert(t, got, qt.DeepEquals, []string{}) // read-your-writes: no sleep

	e.ok("updateMessageLabels", "PATCH", labels, e.full, map[string]any{"removeLabels": []string{"trash"}})
	got, _ = e.search("secret")
	qt.Assert(t, got, qt.DeepEquals, []string{"Secret plan"})

	// A thread label change reaches search too.
	thread := inboxPath(e.inbox.Address) + "/threads/" + st[0].ThreadID + "/labels"
	e.ok("updateThreadLabels", "PATCH", thread, e.full, map[string]any{"addLabels": []string{"trash"}})
	got, _ = e.search("plan")
	qt.Assert(t, got, qt.DeepEquals, []string{})
}

func TestSearchReadYourWrites(t *testing.T) {
	e := newSearchEnv(t)
	for i := 0; i < 5; i++ {
		subject := fmt.Sprintf("Fresh rutabaga %d", i)
		e.ok("send", "POST", inboxPath(e.inbox.Address)+"/messages/send", e.full, map[string]any{
			"to": []string{"someone@elsewhere.example"}, "subject": subject, "text": "hi", "idempotencyKey": subject,
		})
		got, _ := e.search("rutabaga", "limit", "1")
		qt.Assert(t, got, qt.DeepEquals, []string{subject})
	}
}

// TestSearchAnswersAheadOfTheIndexer holds the indexer back. A search still finds the
// mail its inbox received meanwhile and leaves out what was trashed since it was indexed,
// at once: it reads those changes from the store. Only when its inbox has more changes
// queued than a search matches itself does it wait for the indexer.
func TestSearchAnswersAheadOfTheIndexer(t *testing.T) {
	e := newSearchEnv(t)
	qt.Assert(t, e.index.Close(), qt.IsNil)
	gate := &gatedSource{open: make(chan struct{})}
	gate.release()
	e.opts.source = func(s search.Source) search.Source { gate.Source = s; return gate }
	// Long enough that a search which waits for the indexer cannot pass.
	e.startIndex(search.Options{Log: slog.New(slog.DiscardHandler), Wait: 10 * time.Minute})
	old := e.deliver(db.NewMessage{Subject: "Parsnip soup"}, db.NewMessage{Subject: "Parsnip stew"})
	caught, err := e.index.CatchUp(context.Background())
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, caught, qt.IsTrue)

	gate.hold()
	e.deliver(db.NewMessage{Subject: "Parsnip pie", Text: "with a crust of parsnip"})
	labels := inboxPath(e.inbox.Address) + "/messages/" + url.PathEscape(old[0].MessageID) + "/labels"
	e.ok("updateMessageLabels", "PATCH", labels, e.full, map[string]any{"addLabels": []string{"trash"}})
	v := url.Values{"query": {"parsnip"}}
	select {
	case r := <-e.searchAsync(searchPath(e.inbox.Address, v)):
		qt.Assert(t, r.status, qt.Equals, http.StatusOK, qt.Commentf("%s", r.body))
		// Subject hits first; the pie matches in its body too, so it leads.
		qt.Assert(t, subjectsOf(r.json(t)), qt.DeepEquals, []string{"Parsnip pie", "Parsnip stew"})
	case <-time.After(30 * time.Second):
		gate.release() // lets the stuck search end, so the server can close
		t.Fatal("a search waited for the indexer")
	}
	got, _ := e.search("crust")
	qt.Assert(t, got, qt.DeepEquals, []string{"Parsnip pie"})
	got, _ = e.search("soup")
	qt.Assert(t, got, qt.DeepEquals, []string{})

	// Behind more changes than a search matches itself (search's maxTail, 256; these and
	// the ones above are more), the search waits for the indexer, then finds them.
	for i := range 256 {
		e.deliver(db.NewMessage{Subject: fmt.Sprintf("Turnip %d", i)})
	}
	turnips := e.searchAsync(searchPath(e.inbox.Address, url.Values{"query": {"turnip"}, "limit": {"3"}}))
	select {
	case r := <-turnips:
		t.Fatalf("the search answered before the indexer caught up: %d %s", r.status, r.body)
	case <-time.After(300 * time.Millisecond):
	}
	gate.release()
	r := <-turnips
	qt.Assert(t, r.status, qt.Equals, http.StatusOK, qt.Commentf("%s", r.body))
	qt.Assert(t, subjectsOf(r.json(t)), qt.DeepEquals, []string{"Turnip 255", "Turnip 254", "Turnip 253"})
}

// searchAsync sends a search from another goroutine; its answer arrives on the channel.
func (e *searchEnv) searchAsync(path string) <-chan response {
	ch := make(chan response, 1)
	req, err := http.NewRequest("GET", e.url+path, nil)
	qt.Assert(e.t, err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+e.full)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- response{body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		ch <- response{status: res.StatusCode, header: res.Header, body: b}
	}()
	return ch
}

// gatedSource holds the indexer back: while the gate is shut it hands out no changes.
// hold waits for a read that passed the gate before it shut (mu's write lock waits for
// the read locks), so mail delivered after hold returns cannot slip into the index
// through a read already under way.
type gatedSource struct {
	search.Source
	mu   sync.RWMutex  // read-held by a Changes call past the gate
	open chan struct{} // closed while the gate is open; replaced under the write lock
}

func (g *gatedSource) Changes(ctx context.Context, after int64, limit int) ([]search.Change, error) {
	for {
		g.mu.RLock()
		open := g.open
		select {
		case <-open:
			defer g.mu.RUnlock()
			return g.Source.Changes(ctx, after, limit)
		default:
		}
		g.mu.RUnlock()
		select {
		case <-open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (g *gatedSource) hold() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedSource) release() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func TestSearchBadInput(t *testing.T) {
	e := newSearchEnv(t)
	path := inboxPath(e.inbox.Address) + "/messages/search"
	for _, q := range []string{"", "?query=", "?query=" + strings.Repeat("a", 1001)} {
		r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", path+q, e.full, nil)
		qt.Assert(t, string(r.body), qt.Contains, "query")
	}
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", path+"?query=a&labels=trash", e.full, nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", path+"?query=a&limit=0", e.full, nil)
	// Malformed queries are answered, never with a 500.
	for _, q := range []string{`"`, `-`, `OR`, `from:`, `"unclosed phrase`, `before:2026-13-45`, `((a)) [b] {c} *`, "\u00ff\u2028 \U0001F600"} {
		e.ok("searchMessages", "GET", path+"?"+url.Values{"query": {q}}.Encode(), e.full, nil)
	}
}

func TestSearchDeletedInboxLeavesIndex(t *testing.T) {
	e := newSearchEnv(t)
	e.deliver(db.NewMessage{Subject: "Gone soon"}, db.NewMessage{Subject: "Gone too"})
	got, _ := e.search("gone")
	qt.Assert(t, got, qt.HasLen, 2)
	ok, err := e.index.CatchUp(context.Background())
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ok, qt.IsTrue)
	n, err := e.index.DocCount()
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, n, qt.Equals, uint64(2))
	e.ok("deleteInbox", "DELETE", inboxPath(e.inbox.Address), e.full, nil)
	ok, err = e.index.CatchUp(context.Background())
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ok, qt.IsTrue)
	n, err = e.index.DocCount()
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, n, qt.Equals, uint64(0))
}

// TestSearchRecovery stops the indexer with changes still queued, writes more while it is
// down, and restarts it: everything is findable. Then it puts back an older copy of the
// index (as a restore or a lost disk would) and a corrupt one: both are rebuilt.
func TestSearchRecovery(t *testing.T) {
	e := newSearchEnv(t)
	var first []db.NewMessage
	for i := 0; i < 30; i++ {
		first = append(first, db.NewMessage{Subject: fmt.Sprintf("Kohlrabi %d", i)})
	}
	e.deliver(first...)
	qt.Assert(t, e.index.Close(), qt.IsNil) // stopped before it saw these

	path := e.indexPath()
	restart := func() { e.startIndex(search.Options{BatchSize: 7}) }
	restart()
	got, _ := e.search("kohlrabi", "limit", "100")
	qt.Assert(t, got, qt.HasLen, 30)

	// Keep a copy of the index as it is now, then move on without it.
	old := filepath.Join(e.dir, "old.index")
	qt.Assert(t, e.index.Close(), qt.IsNil)
	copyDir(t, path, old)
	restart()
	e.deliver(db.NewMessage{Subject: "Kohlrabi late"})
	got, _ = e.search("kohlrabi", "limit", "100")
	qt.Assert(t, got, qt.HasLen, 31)
	qt.Assert(t, e.index.Close(), qt.IsNil) // on disk and trimmed from the queue

	// The old copy misses a change the queue no longer holds: it is rebuilt.
	qt.Assert(t, os.RemoveAll(path), qt.IsNil)
	qt.Assert(t, os.Rename(old, path), qt.IsNil)
	restart()
	e.eventually("rebuild", func() bool { n, err := e.index.DocCount(); return err == nil && n == 31 })
	got, _ = e.search("kohlrabi", "limit", "100")
	qt.Assert(t, got, qt.HasLen, 31)

	// A corrupt index is rebuilt too.
	qt.Assert(t, e.index.Close(), qt.IsNil)
	qt.Assert(t, os.WriteFile(filepath.Join(path, "index_meta.json"), []byte("{not json"), 0o600), qt.IsNil)
	restart()
	e.eventually("rebuild", func() bool { n, err := e.index.DocCount(); return err == nil && n == 31 })
	got, _ = e.search("kohlrabi late")
	qt.Assert(t, got, qt.DeepEquals, []string{"Kohlrabi late"})
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	qt.Assert(t, os.MkdirAll(to, 0o700), qt.IsNil)
	entries, err := os.ReadDir(from)
	qt.Assert(t, err, qt.IsNil)
	for _, en := range entries {
		if en.IsDir() {
			copyDir(t, filepath.Join(from, en.Name()), filepath.Join(to, en.Name()))
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, en.Name()))
		qt.Assert(t, err, qt.IsNil)
		qt.Assert(t, os.WriteFile(filepath.Join(to, en.Name()), b, 0o600), qt.IsNil)
	}
}

// TestReindexEqualsIncremental builds the index both ways and compares what searches find.
func TestReindexEqualsIncremental(t *testing.T) {
	e := newSearchEnv(t)
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa")
	var msgs []db.NewMessage
	for i := 0; i < 60; i++ {
		msgs = append(msgs, db.NewMessage{
			Subject: words[i%10] + " " + words[(i*3)%10],
			Text:    strings.Repeat(words[(i*7)%10]+" "+words[(i+1)%10]+" ", 1+i%4),
			From:    fmt.Sprintf("%s@%s.example", words[i%4], words[i%3]),
		})
	}
	st := e.deliver(msgs...)
	// Trash a few, so both ways have something to leave out.
	for _, s := range st[:5] {
		qt.Assert(t, db.UpdateMessageLabels(context.Background(), e.store, e.inbox.ID, s.MessageID, []string{"trash"}, nil), qt.IsNil)
	}
	queries := []string{"alpha", "beta gamma", `"delta epsilon"`, "from:beta.example", "iota OR kappa", "-alpha theta", "zeta"}
	before := map[string][]string{}
	for _, q := range queries {
		before[q], _ = e.search(q, "limit", "100")
	}
	qt.Assert(t, e.index.Close(), qt.IsNil)

	n, err := search.Rebuild(context.Background(), e.indexPath(), server.SearchSource(e.store), nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, n, qt.Equals, int64(55))
	e.startIndex(search.Options{})
	for _, q := range queries {
		got, _ := e.search(q, "limit", "100")
		qt.Check(t, got, qt.DeepEquals, before[q], qt.Commentf("query %s", q))
		qt.Check(t, len(got) > 0, qt.IsTrue, qt.Commentf("query %s", q))
	}
}
