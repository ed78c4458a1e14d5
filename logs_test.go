package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// TestLogsAreJSONAndKeepSecrets runs `inboxd serve --log-format json` in process through a
// workload of sends, SMTP mail, reads, searches, failed logins and bad keys: every line on
// stderr is one JSON object, every request has its line with the operation, status and
// duration, no key, password, message body or search term appears anywhere, and a clean
// stop says so. A message received over SMTP has its info line (ids and size).
func TestLogsAreJSONAndKeepSecrets(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dir := t.TempDir()
	const (
		password  = "correct-horse-battery-staple-9"
		badKey    = "bze_00000000-0000-4000-8000-00000000dead.notARealKeyButSecretLookingAAAAAAAAAAAAAAAAAAAA"
		sendBody  = "the purple elephant sings at midnight"
		smtpBody  = "a turquoise giraffe whistles at dawn"
		searchFor = "elephant"
	)
	stdout, stderr := &lockedWriter{w: &bytes.Buffer{}}, &lockedWriter{w: &bytes.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--db", filepath.Join(dir, "inboxd.db"), "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
			"--dns", "off", "--seed", writeFixture(t, dir), "--log-format", "json", "--admin-password", password,
			"--metrics-token", "metrics-secret-token"}, stdout, stderr)
	}()
	base, smtpAddr := waitForListeners(c, stdout)

	requests := 0
	do := func(method, path, key string, body any) int {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, base+path, rd)
		c.Assert(err, qt.IsNil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		c.Assert(err, qt.IsNil)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		requests++
		return res.StatusCode
	}
	c.Assert(do("POST", "/v1/inboxes/agent%40inboxd.test/messages/send", crashKey, map[string]any{
		"to": []string{"sink@inboxd.test"}, "subject": "Log test", "text": sendBody, "idempotencyKey": "log-1"}), qt.Equals, 200)
	cl, err := smtpDial(smtpAddr)
	c.Assert(err, qt.IsNil)
	c.Assert(cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"},
		strings.NewReader(smtpMessage("log-1", "Over SMTP", smtpBody))), qt.IsNil)
	cl.Close()
	c.Assert(do("GET", "/v1/inboxes/sink%40inboxd.test/messages/%3Clog-1%40customer.example%3E", crashKey, nil), qt.Equals, 200)
	c.Assert(do("GET", "/v1/inboxes/sink%40inboxd.test/messages/search?query="+url.QueryEscape(searchFor), crashKey, nil), qt.Equals, 200)
	c.Assert(do("GET", "/v1/inboxes", badKey, nil), qt.Equals, 401)
	c.Assert(do("GET", "/metrics", "", nil), qt.Equals, 401)
	c.Assert(do("GET", "/metrics", "metrics-secret-token", nil), qt.Equals, 200)
	// A failed and a good dashboard login: the password is a form field, never logged.
	for _, pw := range []string{"wrong-" + password, password} {
		form := url.Values{"username": {"admin"}, "password": {pw}}
		req, _ := http.NewRequest("POST", base+"/dashboard/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		res, err := http.DefaultClient.Do(req)
		c.Assert(err, qt.IsNil)
		res.Body.Close()
		requests++
	}

	cancel()
	select {
	case err := <-done:
		c.Assert(err, qt.IsNil)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}

	stderr.mu.Lock()
	logs := stderr.w.(*bytes.Buffer).String()
	stderr.mu.Unlock()
	for _, secret := range []string{crashKey, badKey, password, "metrics-secret-token", sendBody, smtpBody, "purple", "giraffe", searchFor} {
		c.Check(strings.Contains(logs, secret), qt.IsFalse, qt.Commentf("the log holds %q:\n%s", secret, logs))
	}
	seen, stopped, received := 0, false, false
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		c.Assert(json.Unmarshal(sc.Bytes(), &line), qt.IsNil, qt.Commentf("not JSON: %s", sc.Text()))
		c.Assert(line["time"], qt.Not(qt.IsNil))
		c.Assert(line["level"], qt.Not(qt.IsNil))
		if line["msg"] == "smtp: received" {
			received = line["level"] == "INFO" && line["message"] == "<log-1@customer.example>" && line["bytes"] != nil
		}
		if line["msg"] == "stopped" {
			stopped = line["drained"] == true && line["duration_ms"] != nil
		}
		if line["msg"] != "request" {
			continue
		}
		seen++
		for _, field := range []string{"method", "path", "op", "status", "duration_ms"} {
			c.Assert(line[field], qt.Not(qt.IsNil), qt.Commentf("%s lacks %s", sc.Text(), field))
		}
	}
	c.Assert(seen >= requests, qt.IsTrue, qt.Commentf("%d request lines for %d requests:\n%s", seen, requests, logs))
	c.Assert(received, qt.IsTrue, qt.Commentf("no info line for the message received over SMTP:\n%s", logs))
	c.Assert(stopped, qt.IsTrue, qt.Commentf("no line saying the server stopped after draining:\n%s", logs))
}
