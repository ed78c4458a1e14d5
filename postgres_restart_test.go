package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// A real restart of the database under load (extensions section 9, docs/postgres.md "What
// holds across processes"): PostgreSQL is stopped as an operator's restart does (pg_ctl
// --mode=fast: every connection cut) and started again on the same port while two inboxd
// processes take SMTP mail, sends and reads. Every request gets an answer, the usual one or
// 503 unavailable, transient; nothing acknowledged is lost or stored twice; and both
// processes serve as before, without a restart of their own.

// ownCluster is a PostgreSQL cluster of one test's own, which it may restart.
type ownCluster struct {
	dir string
	url string
}

// startOwnCluster starts a cluster with scripts/pg-cluster.sh, stopped when t ends. It
// needs PostgreSQL as the other PostgreSQL tests do: it skips (fails with CI=true) where
// they would.
func startOwnCluster(t *testing.T) *ownCluster {
	t.Helper()
	pgtest.ClusterURL(t)
	// Not under t.TempDir: when we run as root the cluster runs as another user, who
	// must reach its directory; the script makes it and gives it to that user.
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	c := &ownCluster{dir: filepath.Join(os.TempDir(), "inboxd-pg-own-"+hex.EncodeToString(b))}
	out, err := exec.Command("scripts/pg-cluster.sh", "start", c.dir).Output()
	qt.Assert(t, err, qt.IsNil, qt.Commentf("pg-cluster.sh start: %v", stderrOf(err)))
	t.Cleanup(func() { exec.Command("scripts/pg-cluster.sh", "stop", c.dir).Run() })
	c.url = strings.TrimSpace(string(out))
	return c
}

// restart stops the cluster with pg_ctl --mode=fast and starts it on the same port.
func (c *ownCluster) restart(t *testing.T) {
	t.Helper()
	_, err := exec.Command("scripts/pg-cluster.sh", "restart", c.dir).Output()
	qt.Assert(t, err, qt.IsNil, qt.Commentf("pg-cluster.sh restart: %v", stderrOf(err)))
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// apiAnswer is one answer to an API request, or the transport error that took its place.
type apiAnswer struct {
	status int
	body   []byte
	err    error
}

// request sends one API request with the crash key; safe in any goroutine.
func request(client *http.Client, p *proc, method, path string, body any) apiAnswer {
	req, err := apiRequest(p.api, crashKey, method, path, body)
	if err != nil {
		return apiAnswer{err: err}
	}
	res, err := client.Do(req)
	if err != nil {
		return apiAnswer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return apiAnswer{status: res.StatusCode, body: b, err: err}
}

// refused reports whether a is the answer of a server that cannot reach its database:
// 503 unavailable, transient, in the documented error shape. Anything else but a success
// is a failure, named in the error.
func (a apiAnswer) refused() (bool, error) {
	switch {
	case a.err != nil:
		return false, fmt.Errorf("no answer: %v", a.err)
	case a.status == 503:
		var e struct {
			Error struct {
				Code      string `json:"code"`
				Message   string `json:"message"`
				Transient bool   `json:"transient"`
			} `json:"error"`
		}
		if json.Unmarshal(a.body, &e) != nil || e.Error.Code != "unavailable" || !e.Error.Transient || e.Error.Message == "" {
			return false, fmt.Errorf("503 not in the documented shape: %s", a.body)
		}
		return true, nil
	case a.status >= 300:
		return false, fmt.Errorf("answered %d: %s", a.status, a.body)
	}
	return false, nil
}

// restartLoad is the traffic of the restart test and what it had acknowledged.
type restartLoad struct {
	t      *testing.T
	client *http.Client
	procs  []*proc

	mu       sync.Mutex
	ingested []string          // Message-IDs answered 250 over SMTP
	sent     map[string]string // idempotency key -> messageId of sends answered 200
	answers  map[string]int    // "what: outcome" -> count, for the log
}

func (l *restartLoad) count(what string) {
	l.mu.Lock()
	l.answers[what]++
	l.mu.Unlock()
}

// untilAcknowledged calls try until it succeeds, as a client that retries what was
// refused: each message and send is retried until acknowledged, even after stop, so that
// at the end what was acknowledged is all that was sent. A failure other than a refusal
// fails the test and gives up.
func (l *restartLoad) untilAcknowledged(what string, try func(attempt int) (refused bool, err error)) bool {
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		refused, err := try(attempt)
		switch {
		case err != nil:
			l.t.Errorf("%s: %v", what, err)
			return false
		case !refused:
			l.count(what + ": acknowledged")
			return true
		case time.Now().After(deadline):
			l.t.Errorf("%s: still refused after 30 s", what)
			return false
		}
		l.count(what + ": refused")
		time.Sleep(50 * time.Millisecond)
	}
}

// ingest delivers mail to sink over SMTP to process p, one message after another on one
// connection, until stop.
func (l *restartLoad) ingest(p *proc, w int, stop <-chan struct{}) {
	for i := 0; !closed(stop); i++ {
		id := fmt.Sprintf("<restart-%d-%d@customer.example>", w, i)
		msg := "From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: restartingest " + id + "\r\nMessage-ID: " + id +
			"\r\n\r\nrestartingest\r\n"
		ok := l.untilAcknowledged("smtp", func(int) (bool, error) {
			cl, err := smtpDial(p.smtp)
			if err != nil {
				return false, err
			}
			defer cl.Close()
			err = cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg))
			if code := smtpCode(err); err != nil && (code < 400 || code >= 500) {
				return false, fmt.Errorf("%s: %v", id, err) // a 5xx, or no answer at all
			}
			return err != nil, nil
		})
		if !ok {
			return
		}
		l.mu.Lock()
		l.ingested = append(l.ingested, id)
		l.mu.Unlock()
	}
}

// send sends through the API, alternately to each process (a refused send is retried
// on the other with the same key), from four inboxes of its own so that no daily send
// limit is reached, until stop.
func (l *restartLoad) send(w int, stop <-chan struct{}) {
	for i := 0; !closed(stop); i++ {
		key := fmt.Sprintf("send-%d-%d", w, i)
		from := fmt.Sprintf("s%d-%d@inboxd.test", w, i%4)
		body := map[string]any{"to": []string{"sink@inboxd.test"}, "subject": "send " + key + " restartsend", "text": "hi", "idempotencyKey": key}
		var sent struct{ MessageID string }
		ok := l.untilAcknowledged("send", func(attempt int) (bool, error) {
			a := request(l.client, l.procs[(i+attempt)%2], "POST", inboxURL(from)+"/messages/send", body)
			refused, err := a.refused()
			if err == nil && !refused {
				err = json.Unmarshal(a.body, &sent)
			}
			return refused, err
		})
		if !ok {
			return
		}
		l.mu.Lock()
		l.sent[key] = sent.MessageID
		l.mu.Unlock()
	}
}

// read lists, searches and reads sink's mail on each process in turn until stop: an
// answer or a refusal, and a message acknowledged is never missing.
func (l *restartLoad) read(w int, stop <-chan struct{}) {
	for i := 0; !closed(stop); i++ {
		p := l.procs[(i+w)%2]
		path := inboxURL("sink@inboxd.test") + "/messages?limit=20"
		switch i % 3 {
		case 1:
			path = inboxURL("sink@inboxd.test") + "/messages/search?query=restartingest"
		case 2:
			l.mu.Lock()
			n := len(l.ingested)
			if n > 0 {
				path = messageURL("sink@inboxd.test", l.ingested[n-1])
			}
			l.mu.Unlock()
		}
		a := request(l.client, p, "GET", path, nil)
		refused, err := a.refused()
		if err != nil {
			l.t.Errorf("GET %s: %v", path, err)
			return
		}
		l.count(map[bool]string{false: "read: answered", true: "read: refused"}[refused])
		time.Sleep(10 * time.Millisecond)
	}
}

// streamFollower reads the event stream of one process as an EventSource does: when the
// stream ends it connects again, resuming after the last event it got (Last-Event-ID).
type streamFollower struct {
	mu       sync.Mutex
	received map[string]int // Message-ID -> email.received events carried
}

// follow reads p's stream of email.received events from the start of the log until ctx
// ends. An answer other than 200 or a refusal fails the test.
func (f *streamFollower) follow(ctx context.Context, t *testing.T, p *proc) {
	last := "0"
	for ctx.Err() == nil {
		req, err := apiRequest(p.api, crashKey, "GET", "/v1/events?types=email.received", nil)
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Last-Event-ID", last)
		res, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err == nil && res.StatusCode != 200 {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if _, err := (apiAnswer{status: res.StatusCode, body: b}).refused(); err != nil {
				t.Errorf("GET /v1/events: %v", err)
				return
			}
		} else if err == nil {
			last = f.read(res.Body, last)
			res.Body.Close()
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// read records the events of one connection and returns the id of the last. An event
// counts, and its id becomes the one to resume after, only once its blank line has come,
// as an EventSource dispatches it: a connection cut in the middle of an event resumes
// before it.
func (f *streamFollower) read(body io.Reader, last string) string {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
	id, data := "", ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			var ev receivedEvent
			if data != "" && json.Unmarshal([]byte(data), &ev) == nil {
				f.mu.Lock()
				f.received[ev.Message.MessageID]++
				f.mu.Unlock()
			}
			if id != "" {
				last = id
			}
			id, data = "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return last
}

// carried waits until the stream carried every one of ids, and checks each came once.
func (f *streamFollower) carried(t *testing.T, p *proc, ids []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		missing := 0
		for _, id := range ids {
			if f.received[id] == 0 {
				missing++
			}
		}
		f.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			f.mu.Lock()
			var lost []string
			for _, id := range ids {
				if f.received[id] == 0 {
					lost = append(lost, id)
				}
			}
			f.mu.Unlock()
			t.Fatalf("the stream of %s never carried %d acknowledged messages: %v", p.api, missing, lost)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		qt.Check(t, f.received[id], qt.Equals, 1, qt.Commentf("the stream of %s carried %s %d times", p.api, id, f.received[id]))
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func closed(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// TestDatabaseRestartUnderLoadOnPostgres restarts PostgreSQL while two processes on it
// take SMTP mail (each its own), sends (alternately through each) and reads: see the top
// of this file for what must hold.
func TestDatabaseRestartUnderLoadOnPostgres(t *testing.T) {
	t.Parallel()
	cluster := startOwnCluster(t)
	bin := inboxdBinary(t)
	inboxes := []string{`{"address": "sink@{domain}"}`}
	for w := range 2 {
		for i := range 4 {
			inboxes = append(inboxes, fmt.Sprintf(`{"address": "s%d-%d@{domain}"}`, w, i))
		}
	}
	seed := filepath.Join(t.TempDir(), "fixture.json")
	qt.Assert(t, os.WriteFile(seed, []byte(crashFixture(inboxes...)), 0o644), qt.IsNil)
	a := startInboxd(t, bin, "--db", cluster.url, "--data-dir", t.TempDir(), "--seed", seed)
	b := startInboxd(t, bin, "--db", cluster.url, "--data-dir", t.TempDir())
	l := &restartLoad{t: t, client: &http.Client{Timeout: 15 * time.Second}, procs: []*proc{a, b},
		sent: map[string]string{}, answers: map[string]int{}}

	// A stream on each process, opened before the restart and followed across it.
	ctx, cancel := context.WithCancel(context.Background())
	var streams sync.WaitGroup
	defer streams.Wait()
	defer cancel()
	followers := []*streamFollower{{received: map[string]int{}}, {received: map[string]int{}}}
	for i, p := range l.procs {
		streams.Go(func() { followers[i].follow(ctx, t, p) })
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, p := range l.procs {
		wg.Go(func() { l.ingest(p, w, stop) })
		wg.Go(func() { l.send(w, stop) })
		wg.Go(func() { l.read(w, stop) })
	}
	time.Sleep(time.Second)
	began := time.Now()
	cluster.restart(t)
	t.Logf("PostgreSQL restarted in %s", time.Since(began).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("answers: %v", l.answers)
	if t.Failed() {
		t.Fatalf("process a:\n%s\nprocess b:\n%s", a.logText(), b.logText())
	}
	qt.Assert(t, l.answers["smtp: acknowledged"] > 0 && l.answers["send: acknowledged"] > 0, qt.IsTrue)

	servesAsBefore(t, l.procs)
	checkAcknowledged(t, l)
	for i, p := range l.procs {
		followers[i].carried(t, p, l.ingested)
	}
}

// servesAsBefore checks that each process answers as usual right after the restart,
// without a restart of its own: SMTP, a send, and a wait ended by mail to the other
// process (its connection that listens for the others' commits is back).
func servesAsBefore(t *testing.T, procs []*proc) {
	t.Helper()
	client := &http.Client{Timeout: 15 * time.Second}
	for i, p := range procs {
		other := procs[1-i]
		id := fmt.Sprintf("<after-%d@customer.example>", i)
		since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
		waited := make(chan apiAnswer, 1)
		go func() {
			waited <- request(client, p, "GET", inboxURL("sink@inboxd.test")+"/messages/wait?timeout=10&since="+since+
				"&query="+url.QueryEscape("subject:afterrestart"+fmt.Sprint(i)), nil)
		}()
		time.Sleep(200 * time.Millisecond) // the wait is under way
		cl, err := smtpDial(other.smtp)
		qt.Assert(t, err, qt.IsNil)
		msg := "From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: afterrestart" + fmt.Sprint(i) + "\r\nMessage-ID: " + id + "\r\n\r\nhi\r\n"
		qt.Assert(t, cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg)), qt.IsNil)
		cl.Close()
		sent := time.Now()
		got := <-waited
		qt.Assert(t, got.err, qt.IsNil)
		qt.Assert(t, got.status, qt.Equals, 200, qt.Commentf("%s", got.body))
		qt.Assert(t, string(got.body), qt.Contains, id)
		qt.Assert(t, time.Since(sent) < 2*time.Second, qt.IsTrue, qt.Commentf("the wait ended %s after the mail", time.Since(sent)))

		got = request(client, p, "POST", inboxURL("s0-0@inboxd.test")+"/messages/send", map[string]any{
			"to": []string{"sink@inboxd.test"}, "subject": "after the restart", "text": "hi", "idempotencyKey": fmt.Sprintf("after-%d", i)})
		qt.Assert(t, got.err, qt.IsNil)
		qt.Assert(t, got.status, qt.Equals, 200, qt.Commentf("%s", got.body))
	}
}

// checkAcknowledged checks, once the queues are drained, that each acknowledged message
// is in sink once and found by search on both processes, and each acknowledged send is
// stored once and delivered to sink once.
func checkAcknowledged(t *testing.T, l *restartLoad) {
	t.Helper()
	r := &rig{t: t, client: l.client}
	for _, p := range l.procs {
		r.drain(p)
	}
	p := l.procs[0]
	inSink, delivered := map[string]int{}, map[string]int{}
	for _, m := range r.messages(p, "sink@inboxd.test") {
		inSink[m.MessageID]++
		if f := strings.Fields(m.Subject); len(f) == 3 && f[0] == "send" {
			delivered[f[1]]++
		}
	}
	ingested := map[string]int{}
	for _, id := range l.ingested {
		ingested[id] = 1
		qt.Check(t, inSink[id], qt.Equals, 1, qt.Commentf("acknowledged %s stored %d times", id, inSink[id]))
	}
	for _, q := range l.procs {
		qt.Check(t, r.search(q, "sink@inboxd.test", "restartingest"), qt.DeepEquals, ingested, qt.Commentf("search on %s", q.api))
	}
	stored := map[string]int{}
	for w := range 2 {
		for i := range 4 {
			for _, m := range r.messages(p, fmt.Sprintf("s%d-%d@inboxd.test", w, i)) {
				if f := strings.Fields(m.Subject); len(f) == 3 && f[0] == "send" {
					stored[f[1]]++
					qt.Check(t, m.MessageID, qt.Equals, l.sent[f[1]], qt.Commentf("send %s", f[1]))
				}
			}
		}
	}
	for key := range l.sent {
		qt.Check(t, stored[key], qt.Equals, 1, qt.Commentf("send %s stored %d times", key, stored[key]))
		qt.Check(t, delivered[key], qt.Equals, 1, qt.Commentf("send %s delivered %d times", key, delivered[key]))
	}
	qt.Check(t, len(stored), qt.Equals, len(l.sent), qt.Commentf("sends nobody acknowledged"))
	qt.Check(t, len(delivered), qt.Equals, len(l.sent), qt.Commentf("deliveries of sends nobody acknowledged"))
}
