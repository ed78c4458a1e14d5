package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// TestEventsEndToEnd runs `inboxd serve` in process: mail that arrives over SMTP is on an
// open event stream and answers a wait started before it, and stopping the server with a
// stream still open ends the stream and drains cleanly.
func TestEventsEndToEnd(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dir := t.TempDir()
	stdout, stderr := &lockedWriter{w: &bytes.Buffer{}}, &lockedWriter{w: &bytes.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", filepath.Join(dir, "inboxd.db"), "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
			"--dns", "off", "--seed", writeFixture(t, dir), "--log-format", "json"}, stdout, stderr)
	}()
	base, smtpAddr := waitForListeners(c, stdout)

	req, err := http.NewRequest("GET", base+"/v1/events?types=email.received", nil)
	c.Assert(err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+crashKey)
	res, err := http.DefaultClient.Do(req)
	c.Assert(err, qt.IsNil)
	defer res.Body.Close()
	c.Assert(res.StatusCode, qt.Equals, 200)
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	waited := make(chan map[string]any, 1)
	go func() {
		since := url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano))
		req, _ := http.NewRequest("GET", base+"/v1/inboxes/sink%40inboxd.test/messages/wait?timeout=60&since="+since, nil)
		req.Header.Set("Authorization", "Bearer "+crashKey)
		var m map[string]any
		if res, err := http.DefaultClient.Do(req); err == nil {
			json.NewDecoder(res.Body).Decode(&m)
			res.Body.Close()
		}
		waited <- m
	}()
	time.Sleep(200 * time.Millisecond) // the wait is usually waiting by now; either way it must answer

	cl, err := smtpDial(smtpAddr)
	c.Assert(err, qt.IsNil)
	c.Assert(cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(smtpMessage("ev-1", "Live", "hello"))), qt.IsNil)
	cl.Close()

	var ev struct{ Message struct{ MessageID string } }
	c.Assert(json.Unmarshal([]byte(strings.TrimPrefix(nextData(c, lines), "data: ")), &ev), qt.IsNil)
	c.Assert(ev.Message.MessageID, qt.Equals, "<ev-1@customer.example>")
	select {
	case m := <-waited:
		c.Assert(m["timedOut"], qt.Equals, false, qt.Commentf("%v", m))
		c.Assert(m["messages"].([]any)[0].(map[string]any)["messageId"], qt.Equals, "<ev-1@customer.example>")
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not answer")
	}

	cancel() // the stream is still open
	select {
	case err := <-done:
		c.Assert(err, qt.IsNil)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	for range lines { // the stream ended
	}
	stderr.mu.Lock()
	logs := stderr.w.(*bytes.Buffer).String()
	stderr.mu.Unlock()
	c.Assert(logs, qt.Contains, `"drained":true`)
}

// waitForListeners reads the API's base URL and the SMTP address from serve's stdout. The
// bound is loose: a start takes a second, but the tests share two cores with other tests'
// servers, built with the race detector.
func waitForListeners(c *qt.C, stdout *lockedWriter) (base, smtpAddr string) {
	deadline := time.Now().Add(60 * time.Second)
	for smtpAddr == "" {
		stdout.mu.Lock()
		out := stdout.w.(*bytes.Buffer).String()
		stdout.mu.Unlock()
		if m := apiRE.FindStringSubmatch(out); m != nil {
			base = "http://" + m[1]
		}
		if m := smtpRE.FindStringSubmatch(out); m != nil {
			smtpAddr = m[1]
		}
		c.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("no start: %s", out))
		time.Sleep(10 * time.Millisecond)
	}
	return base, smtpAddr
}

// nextData returns the data of the next event on a stream's lines, within 10 s.
func nextData(c *qt.C, lines <-chan string) string {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			c.Assert(ok, qt.IsTrue, qt.Commentf("the stream ended"))
			if strings.HasPrefix(l, "data: ") {
				return l
			}
		case <-deadline:
			c.Fatal("no event within 10 s")
		}
	}
}
