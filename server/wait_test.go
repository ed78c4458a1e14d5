package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// waitPath is a wait on an inbox with the query given (since first).
func waitPath(addr string, since time.Time, query string) string {
	return inboxPath(addr) + "/messages/wait?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339Nano)) + query
}

// waiting reports how many waits the server has in progress, from /metrics.
func (e *env) waiting(n int) bool {
	return strings.Contains(string(e.do("GET", "/metrics", "", nil).body), "inboxd_message_waits "+strconv.Itoa(n)+"\n")
}

// startWait starts a wait in the background; its answer comes on the channel.
func (e *env) startWait(key, path string) <-chan map[string]any {
	out := make(chan map[string]any, 1)
	go func() {
		r := e.do("GET", path, key, nil)
		var m map[string]any
		if r.status == 200 && e.schema.Response("waitForMessages", r.body) == nil {
			m = r.json(e.t)
		}
		out <- m
	}()
	return out
}

func answered(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m := <-ch:
		qt.Assert(t, m, qt.Not(qt.IsNil), qt.Commentf("the wait failed"))
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("the wait did not answer")
		return nil
	}
}

func TestWaitAnswersWhenMailArrives(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	since := time.Now().Add(-time.Second)
	ch := e.startWait(e.readOnly, waitPath(in, since, "&timeout=60"))
	e.eventually("the wait to start", func() bool { return e.waiting(1) })
	e.mailTo(in, "<a@far.test>", "your code")
	m := answered(t, ch)
	qt.Assert(t, m["timedOut"], qt.Equals, false)
	qt.Assert(t, ids(m, "messages"), qt.DeepEquals, []string{"<a@far.test>"})
	qt.Assert(t, m["messages"].([]any)[0].(map[string]any)["text"], qt.IsNil, qt.Commentf("the listMessages item shape"))
}

func TestWaitAnswersAtOnceWhenMailIsThere(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	since := time.Now().Add(-time.Second)
	e.mailTo(in, "<a@far.test>", "one")
	e.mailTo(in, "<b@far.test>", "two")
	e.mailTo(in, "<c@far.test>", "three")
	start := time.Now()
	m := e.ok("waitForMessages", "GET", waitPath(in, since, "&count=2"), e.readOnly, nil)
	qt.Assert(t, time.Since(start) < 20*time.Second, qt.IsTrue)
	qt.Assert(t, m["timedOut"], qt.Equals, false)
	qt.Assert(t, ids(m, "messages"), qt.DeepEquals, []string{"<a@far.test>", "<b@far.test>"})
	// since leaves out what came before it.
	m = e.ok("waitForMessages", "GET", waitPath(in, time.Now().Add(time.Hour), "&timeout=1"), e.readOnly, nil)
	qt.Assert(t, m["timedOut"], qt.Equals, true)
	qt.Assert(t, m["messages"], qt.DeepEquals, []any{})
}

func TestWaitTimesOutWithWhatMatched(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	since := time.Now().Add(-time.Second)
	e.mailTo(in, "<a@far.test>", "one")
	e.mailTo(in, "<b@far.test>", "two")
	m := e.ok("waitForMessages", "GET", waitPath(in, since, "&count=3&timeout=1"), e.readOnly, nil)
	qt.Assert(t, m["timedOut"], qt.Equals, true)
	qt.Assert(t, ids(m, "messages"), qt.DeepEquals, []string{"<a@far.test>", "<b@far.test>"})
}

func TestWaitHonoursQueryAndLabels(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	since := time.Now().Add(-time.Second)
	e.mailTo(in, "<news@far.test>", "weekly newsletter")
	coded := e.startWait(e.readOnly, waitPath(in, since, "&query="+url.QueryEscape(`subject:code`)))
	vip := e.startWait(e.readOnly, waitPath(in, since, "&labels=received&labels=vip"))
	trashed := e.startWait(e.readOnly, waitPath(in, since, "&labels=trash"))
	e.eventually("the waits to start", func() bool { return e.waiting(3) })
	e.mailTo(in, "<code@far.test>", "your code is 1234")
	qt.Assert(t, ids(answered(t, coded), "messages"), qt.DeepEquals, []string{"<code@far.test>"})
	select {
	case <-vip:
		t.Fatalf("the vip wait answered before any message had the label")
	default:
	}
	e.ok("updateMessageLabels", "PATCH", msgPath(in, "<news@far.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	qt.Assert(t, ids(answered(t, vip), "messages"), qt.DeepEquals, []string{"<news@far.test>"})
	e.ok("updateMessageLabels", "PATCH", msgPath(in, "<code@far.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"trash"}})
	qt.Assert(t, ids(answered(t, trashed), "messages"), qt.DeepEquals, []string{"<code@far.test>"})
	// Trashed and quarantined mail does not count by default.
	m := e.ok("waitForMessages", "GET", waitPath(in, since, "&count=5&timeout=1"), e.readOnly, nil)
	qt.Assert(t, ids(m, "messages"), qt.DeepEquals, []string{"<news@far.test>"})
	e.deliver(in, db.NewMessage{MessageID: "<held@far.test>", From: "x@far.test", To: []string{in}, Subject: "code", Text: "code",
		Protection: &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: "2026-11-01T00:00:00.000Z",
			Authentication: db.Authentication{SPF: "fail", DKIM: "none", DMARC: "fail", SigningDomains: []string{}},
			Spam:           db.Spam{Score: 9, Threshold: 6}, Antivirus: db.Antivirus{Status: "clean", Signatures: []string{}}, Reasons: []string{"spam"}}})
	m = e.ok("waitForMessages", "GET", waitPath(in, since, "&labels=quarantined&timeout=1"), e.readOnly, nil)
	qt.Assert(t, ids(m, "messages"), qt.DeepEquals, []string{"<held@far.test>"})
}

func TestWaitRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	now := time.Now()
	for _, q := range []string{"", "?since=yesterday", "?since=2026-01-01", waitQuery(now, "&count=0"), waitQuery(now, "&count=101"),
		waitQuery(now, "&timeout=0"), waitQuery(now, "&timeout=61"), waitQuery(now, "&query="), waitQuery(now, "&nope=1")} {
		e.fails(422, "invalid_argument", "GET", inboxPath(in)+"/messages/wait"+q, e.full, nil)
	}
}

func waitQuery(since time.Time, rest string) string {
	return "?since=" + url.QueryEscape(since.UTC().Format(time.RFC3339)) + rest
}

func TestWaitAuthorization(t *testing.T) {
	e := newEnv(t)
	mine, other := e.createInbox("mine"), e.createInbox("other")
	since := time.Now().Add(-time.Second)
	e.mailTo(mine, "<m@far.test>", "mine")
	p := waitPath(mine, since, "&timeout=1")
	e.fails(401, "unauthorized", "GET", p, "", nil)
	e.fails(403, "forbidden", "GET", p, e.newKey("acme", db.ScopeInboxesRead, db.ScopeMessagesWrite, db.ScopeMessagesSend), nil)
	e.fails(404, "not_found", "GET", p, e.other, nil)
	e.fails(404, "not_found", "GET", waitPath("nobody@inboxd.test", since, ""), e.full, nil)
	for _, key := range []string{e.full, e.readOnly, e.newKey("acme", db.ScopeMessagesRead), e.mailboxKey("acme", mine)} {
		m := e.ok("waitForMessages", "GET", p, key, nil)
		qt.Assert(t, ids(m, "messages"), qt.DeepEquals, []string{"<m@far.test>"})
	}
	e.fails(403, "forbidden", "GET", waitPath(other, since, "&timeout=1"), e.mailboxKey("acme", mine), nil)
}

func TestWaitForMessageTool(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	since := time.Now().Add(-time.Second)
	e.mailTo(in, "<a@far.test>", "your code")
	e.mailTo(in, "<b@far.test>", "your code again")
	stamp := since.UTC().Format(time.RFC3339Nano)
	cs := e.mcpSession(e.readOnly)
	got := succeeds(t, cs, "wait_for_message", map[string]any{"inboxId": in, "since": stamp, "query": "code", "count": 2})
	rest := e.ok("waitForMessages", "GET", waitPath(in, since, "&query=code&count=2"), e.readOnly, nil)
	qt.Assert(t, got, qt.DeepEquals, any(rest))
	toolFails(t, cs, 422, "invalid_argument", "wait_for_message", map[string]any{"inboxId": in, "since": stamp, "count": 0})
	// A tool call may wait too: the answer comes when the mail does.
	done := make(chan any, 1)
	go func() {
		done <- succeeds(t, cs, "wait_for_message", map[string]any{"inboxId": in, "since": time.Now().UTC().Format(time.RFC3339Nano), "timeout": 60})
	}()
	e.eventually("the tool's wait to start", func() bool { return e.waiting(1) })
	e.mailTo(in, "<c@far.test>", "late")
	select {
	case res := <-done:
		qt.Assert(t, ids(res.(map[string]any), "messages"), qt.DeepEquals, []string{"<c@far.test>"})
	case <-time.After(30 * time.Second):
		t.Fatalf("the tool did not answer")
	}
}

// A client that leaves a wait is no server error.
func TestWaitLeftByItsClient(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("desk")
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+waitPath(in, time.Now(), "&timeout=60"), nil)
	qt.Assert(t, err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+e.readOnly)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
	e.eventually("the wait to start", func() bool { return e.waiting(1) })
	cancel()
	<-done
	e.eventually("the wait to end", func() bool { return e.waiting(0) })
	metrics := string(e.do("GET", "/metrics", "", nil).body)
	qt.Assert(t, metrics, qt.Not(qt.Contains), `op="waitForMessages",status="500"`)
}
