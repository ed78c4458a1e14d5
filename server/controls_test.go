package server_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/mail/webhook"
	"github.com/inboxd/inboxd/server"
)

// newControlsEnv is an env whose server serves the test controls on its own clock, with
// an SMTP listener; the fault rules reach the API, SMTP, delivery and triage.
func newControlsEnv(t *testing.T) *env { return newControlsEnvScanning(t, nil) }

// newControlsEnvScanning is newControlsEnv whose mail service scans received mail with
// scan (nil: none, as serve --protection off).
func newControlsEnvScanning(t *testing.T, scan *protect.Config) *env {
	clock, faults := &db.Clock{}, &mail.Faults{}
	return newEnvWith(t, serverOptions{now: clock.Now, smtp: &server.SMTPConfig{Faults: faults}, protect: scan,
		mail: func(c *mail.Config) { c.Faults = faults },
		api:  func(c *server.Config) { c.TestControls, c.Clock, c.Faults = true, clock, faults }})
}

func TestTestControlsAreAbsentWithoutTheFlag(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct{ method, path string }{
		{"POST", "/_inboxd/keys"}, {"DELETE", "/_inboxd/keys/key_0123456789abcdef"}, {"GET", "/_inboxd/clock"},
		{"POST", "/_inboxd/clock"}, {"POST", "/_inboxd/accounts/acme/disable"},
	} {
		e.fails(http.StatusNotFound, "not_found", r.method, r.path, "", map[string]any{"advanceSeconds": 1})
	}
}

func TestTestKeysWorkAndAreRevoked(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	k := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}})
	key, id := k["key"].(string), k["keyId"].(string)
	e.ok("listInboxes", "GET", "/v1/inboxes", key, nil)
	e.fails(http.StatusForbidden, "forbidden", "POST", "/v1/inboxes", key, map[string]any{"username": "x"})

	mk := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "inboxId": box})
	mailbox := mk["key"].(string)
	e.ok("listMessages", "GET", inboxPath(box)+"/messages", mailbox, nil)
	again := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "inboxId": box})
	e.ok("listMessages", "GET", inboxPath(box)+"/messages", mailbox, nil) // a test's new key leaves the others working
	e.ok("listMessages", "GET", inboxPath(box)+"/messages", again["key"].(string), nil)

	e.ok("revokeTestKey", "DELETE", "/_inboxd/keys/"+id, "", nil)
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/v1/inboxes", key, nil)
	e.fails(http.StatusNotFound, "not_found", "DELETE", "/_inboxd/keys/key_0123456789abcdef", "", nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "DELETE", "/_inboxd/keys/"+key, "", nil)
}

func TestTestKeyRequestsAreChecked(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	for _, bad := range []struct {
		status int
		code   string
		body   map[string]any
	}{
		{422, "invalid_argument", map[string]any{"accountId": "acme"}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "inboxId": box}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read", "inboxes:read"}}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:fly"}}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "inboxId": box, "days": 3}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "days": 400}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "extra": 1}},
		{404, "not_found", map[string]any{"accountId": "nobody", "scopes": []string{"inboxes:read"}}},
		{404, "not_found", map[string]any{"accountId": "other", "inboxId": box}},
	} {
		e.fails(bad.status, bad.code, "POST", "/_inboxd/keys", "", bad.body)
	}
	for _, body := range []map[string]any{{"accountId": "acme"}, {"accountId": "acme", "scopes": []string{"inboxes:read"}, "inboxId": box}} {
		r := e.fails(422, "invalid_argument", "POST", "/_inboxd/keys", "", body)
		qt.Check(t, r.json(t)["error"].(map[string]any)["message"], qt.Equals,
			"scopes: give exactly one of scopes (an account key) and inboxId (a mailbox key)")
	}
}

func TestDisabledAccountsAreDeniedUntilEnabled(t *testing.T) {
	e := newControlsEnv(t)
	got := e.ok("disableAccount", "POST", "/_inboxd/accounts/acme/disable", "", nil)
	qt.Assert(t, got, qt.DeepEquals, map[string]any{"accountId": "acme", "disabled": true})
	e.fails(http.StatusForbidden, "access_denied", "GET", "/v1/inboxes", e.full, nil)
	e.ok("listInboxes", "GET", "/v1/inboxes", e.other, nil)
	e.ok("enableAccount", "POST", "/_inboxd/accounts/acme/enable", "", nil)
	e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil)
	e.fails(http.StatusNotFound, "not_found", "POST", "/_inboxd/accounts/nobody/disable", "", nil)
}

func TestTheClockMovesForwardForKeyExpiry(t *testing.T) {
	e := newControlsEnv(t)
	before := e.ok("getClock", "GET", "/_inboxd/clock", "", nil)["now"].(string)
	k := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "days": 2})
	key := k["key"].(string)
	e.ok("listInboxes", "GET", "/v1/inboxes", key, nil)
	after := e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 2*86400 + 1})["now"].(string)
	qt.Assert(t, after > before, qt.IsTrue, qt.Commentf("%s, then %s", before, after))
	qt.Assert(t, after[:10] > before[:10], qt.IsTrue) // two days on
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/v1/inboxes", key, nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 0})
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": -5})
}

func TestTheOutboxShowsWhatWasSentAndPurgeEmptiesAnInbox(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	send := func(key, to string) {
		e.ok("send", "POST", inboxPath(box)+"/messages/send", e.full, map[string]any{"to": []string{to}, "subject": "hello " + key,
			"text": "hi", "idempotencyKey": key})
	}
	send("k1", "ann@far.example")
	send("k2", "bob@far.example")
	out := e.ok("listOutbox", "GET", "/_inboxd/outbox", "", nil)["messages"].([]any)
	qt.Assert(t, out, qt.HasLen, 2)
	last := out[0].(map[string]any)
	qt.Assert(t, last["subject"], qt.Equals, "hello k2")
	qt.Assert(t, last["raw"], qt.Matches, `(?s).*Subject: hello k2\r\n.*`)
	qt.Assert(t, last["inboxId"], qt.Equals, box)
	only := e.ok("listOutbox", "GET", "/_inboxd/outbox?to=ANN@far.example&limit=5", "", nil)["messages"].([]any)
	qt.Assert(t, only, qt.HasLen, 1)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", "/_inboxd/outbox?limit=1001", "", nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", "/_inboxd/outbox?color=red", "", nil)

	e.ok("clearOutbox", "DELETE", "/_inboxd/outbox", "", nil)
	qt.Assert(t, e.ok("listOutbox", "GET", "/_inboxd/outbox", "", nil)["messages"], qt.HasLen, 0)

	got := e.ok("purgeMessages", "DELETE", "/_inboxd"+strings.TrimPrefix(inboxPath(box), "/v1")+"/messages", "", nil)
	qt.Assert(t, got["deleted"], qt.Equals, 2.0)
	qt.Assert(t, e.ok("listMessages", "GET", inboxPath(box)+"/messages?labels=sent", e.full, nil)["messages"], qt.HasLen, 0)
	e.fails(http.StatusNotFound, "not_found", "DELETE", "/_inboxd/inboxes/nobody%40inboxd.test/messages", "", nil)
	e.ok("deleteInbox", "DELETE", inboxPath(box), e.full, nil)
	e.fails(http.StatusGone, "inbox_retired", "DELETE", "/_inboxd"+strings.TrimPrefix(inboxPath(box), "/v1")+"/messages", "", nil)
}

// injected POSTs JSON fields to the inject control and returns its answer.
func (e *env) injected(inbox string, fields map[string]any) map[string]any {
	e.t.Helper()
	return e.ok("injectMessage", "POST", controlInbox(inbox)+"/messages", "", fields)
}

func controlInbox(addr string) string { return "/_inboxd" + strings.TrimPrefix(inboxPath(addr), "/v1") }

func TestInjectedMailIsReceivedMail(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	first := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "Card on file", "text": "How do I update it?",
		"cc": []string{"bob@customer.example"}, "replyTo": []string{"billing@customer.example"},
		"headers": []map[string]string{{"name": "List-Id", "value": "<news.customer.example>"}}})
	reply := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "Re: Card on file", "text": "Any news?",
		"inReplyTo": first["messageId"], "references": []any{first["messageId"]}})
	qt.Assert(t, reply["threadId"], qt.Equals, first["threadId"])

	m := e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(first["messageId"].(string)), e.full, nil)
	qt.Assert(t, m["from"], qt.Equals, "ann@customer.example")
	qt.Assert(t, m["to"], qt.DeepEquals, []any{box})
	qt.Assert(t, m["cc"], qt.DeepEquals, []any{"bob@customer.example"})
	qt.Assert(t, m["replyTo"], qt.DeepEquals, []any{"billing@customer.example"})
	qt.Assert(t, m["labels"], qt.DeepEquals, []any{"received", "unread"})
	qt.Assert(t, m["text"], qt.Equals, "How do I update it?")
	evs, err := e.store.Events(context.Background(), 0, db.EventFilter{AccountID: "acme", Types: []string{db.EventReceived}}, 10)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, evs, qt.HasLen, 2)

	raw := "From: carl@customer.example\r\nTo: " + box + "\r\nSubject: Raw one\r\nMessage-ID: <raw-1@customer.example>\r\n\r\nplain body\r\n"
	for range 2 { // the same message twice is stored once, like SMTP mail
		r := e.do("POST", controlInbox(box)+"/messages", "", raw, "Content-Type", "message/rfc822")
		qt.Assert(t, r.status, qt.Equals, http.StatusOK, qt.Commentf("%s", r.body))
		qt.Assert(t, string(r.body), qt.Contains, `"messageId":"<raw-1@customer.example>"`)
	}
	list := e.ok("listMessages", "GET", inboxPath(box)+"/messages", e.full, nil)["messages"].([]any)
	qt.Assert(t, list, qt.HasLen, 3)
}

func TestInjectedVerdictsReplaceTheScanAndTheClassifier(t *testing.T) {
	e := newControlsEnvScanning(t, &protect.Config{})
	box := e.createInbox("desk")
	triage := map[string]any{"status": "complete", "version": 1, "model": "test", "analyzedAt": "2026-09-20T18:07:50.123Z",
		"durationMs": 1, "bodyTruncated": false, "usage": map[string]any{"inputTokens": 1, "outputTokens": 1},
		"category":   map[string]any{"value": "billing", "confidence": 0.9, "probabilities": map[string]any{"billing": 0.9, "support": 0.02, "sales": 0.02, "personal": 0.02, "notification": 0.02, "other": 0.02}},
		"needsReply": map[string]any{"value": true, "probability": 0.8},
		"urgency":    map[string]any{"value": "high", "score": 2.1, "confidence": 0.7, "probabilities": map[string]any{"0": 0.05, "1": 0.15, "2": 0.6, "3": 0.2}}}
	got := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "Invoice", "text": "pay", "triage": triage})
	m := e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(got["messageId"].(string)), e.full, nil)
	qt.Assert(t, m["triage"].(map[string]any)["category"].(map[string]any)["value"], qt.Equals, "billing")
	e.ok("listMessages", "GET", inboxPath(box)+"/messages?category=billing", e.full, nil)

	held := map[string]any{"status": "quarantined", "scannedAt": "2026-09-20T18:07:46.000Z",
		"authentication": map[string]any{"spf": "fail", "dkim": "none", "dmarc": "fail", "signingDomains": []any{}},
		"spam":           map[string]any{"score": 9.5, "threshold": 6}, "antivirus": map[string]any{"status": "clean", "signatures": []any{}},
		"reasons": []any{"spam"}}
	q := e.injected(box, map[string]any{"from": "eve@spam.example", "subject": "You won", "text": "click", "protection": held})
	list := e.ok("listMessages", "GET", inboxPath(box)+"/messages", e.full, nil)["messages"].([]any)
	qt.Assert(t, list, qt.HasLen, 1) // quarantined mail is not listed
	m = e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(q["messageId"].(string)), e.full, nil)
	qt.Assert(t, m["labels"], qt.DeepEquals, []any{"quarantined"})
	qt.Assert(t, m["protection"].(map[string]any)["status"], qt.Equals, "quarantined")
}

func TestInjectRefusesBadRequests(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	path := controlInbox(box) + "/messages"
	for _, body := range []map[string]any{
		{"subject": "no sender"},
		{"from": "not an address"},
		{"from": "a@b.example", "color": "red"},
		{"from": "a@b.example", "headers": []map[string]string{{"name": "From", "value": "x@y.example"}}},
		{"from": "a@b.example", "headers": []map[string]string{{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}}},
		{"from": "a@b.example", "subject": "two\r\nlines"},
		{"from": "a@b.example", "triage": map[string]any{"status": "maybe"}},
	} {
		e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", path, "", body)
	}
	r := e.do("POST", path, "", "hello", "Content-Type", "text/plain")
	qt.Assert(t, r.status, qt.Equals, http.StatusUnsupportedMediaType)
	qt.Assert(t, string(r.body), qt.Contains, "Content-Type must be application/json or message/rfc822")
	r = e.do("POST", path, "", "", "Content-Type", "message/rfc822")
	qt.Assert(t, r.status, qt.Equals, http.StatusUnprocessableEntity, qt.Commentf("%s", r.body))
	e.fails(http.StatusNotFound, "not_found", "POST", "/_inboxd/inboxes/nobody%40inboxd.test/messages", "", map[string]any{"from": "a@b.example"})
	e.ok("deleteInbox", "DELETE", inboxPath(box), e.full, nil)
	e.fails(http.StatusGone, "inbox_retired", "POST", path, "", map[string]any{"from": "a@b.example"})
}

func TestResetBringsBackTheStartAndSearchAgrees(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	seed := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "kohlrabi report", "text": "seeded"})
	qt.Assert(t, e.store.SnapshotForReset(context.Background()), qt.IsNil) // what serve --test-controls does at start

	e.injected(box, map[string]any{"from": "bob@customer.example", "subject": "kohlrabi again", "text": "later"})
	e.ok("send", "POST", inboxPath(box)+"/messages/send", e.full, map[string]any{"to": []string{"x@far.example"}, "subject": "s",
		"text": "t", "idempotencyKey": "k1"})
	e.createInbox("extra")
	e.ok("updateMessageLabels", "PATCH", inboxPath(box)+"/messages/"+url.PathEscape(seed["messageId"].(string))+"/labels", e.full,
		map[string]any{"addLabels": []string{"trash"}})
	e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 3600})

	qt.Assert(t, e.ok("resetServer", "POST", "/_inboxd/reset", "", nil), qt.DeepEquals, map[string]any{"reset": true})
	list := e.ok("listMessages", "GET", inboxPath(box)+"/messages", e.full, nil)["messages"].([]any)
	qt.Assert(t, list, qt.HasLen, 1)
	qt.Assert(t, list[0].(map[string]any)["subject"], qt.Equals, "kohlrabi report")
	hits := e.ok("searchMessages", "GET", inboxPath(box)+"/messages/search?query=kohlrabi", e.full, nil)["messages"].([]any)
	qt.Assert(t, hits, qt.HasLen, 1)
	qt.Assert(t, e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil)["inboxes"], qt.HasLen, 1)
	qt.Assert(t, e.ok("listOutbox", "GET", "/_inboxd/outbox", "", nil)["messages"], qt.HasLen, 0)
	again := e.ok("send", "POST", inboxPath(box)+"/messages/send", e.full, map[string]any{"to": []string{"x@far.example"}, "subject": "s",
		"text": "t", "idempotencyKey": "k1"})
	_, dedup := again["deduplicated"]
	qt.Assert(t, dedup, qt.IsFalse) // the key is free again
	now := e.ok("getClock", "GET", "/_inboxd/clock", "", nil)["now"].(string)
	qt.Assert(t, now < time.Now().Add(30*time.Minute).UTC().Format(db.TimeFormat), qt.IsTrue) // the hour ahead is gone
}

// The clock moves every rule that reads time: a download link expires, a send window
// rolls over, a month's usage starts again.
func TestTheClockMovesLinksWindowsAndUsage(t *testing.T) {
	clock, faults := &db.Clock{}, &mail.Faults{}
	e := newEnvWith(t, serverOptions{now: clock.Now, mail: func(c *mail.Config) { c.Faults, c.SendLimit = faults, 1 },
		api: func(c *server.Config) { c.TestControls, c.Clock, c.Faults = true, clock, faults }})
	box := e.createInbox("desk")
	got := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "file", "text": "see attached",
		"attachments": []any{map[string]any{"filename": "a.txt", "contentType": "text/plain", "content": "aGVsbG8="}}})
	path := inboxPath(box) + "/messages/" + url.PathEscape(got["messageId"].(string))
	att := e.ok("getMessage", "GET", path, e.full, nil)["attachments"].([]any)[0].(map[string]any)
	link := e.ok("getAttachment", "GET", path+"/attachments/"+att["attachmentId"].(string), e.full, nil)["downloadUrl"].(string)
	download := func() int { return e.do("GET", link[strings.Index(link, "/attachments/"):], "", nil).status }
	qt.Assert(t, download(), qt.Equals, http.StatusOK)
	e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 301})
	qt.Assert(t, download(), qt.Equals, http.StatusUnauthorized) // five minutes, and the link is gone

	key := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read", "messages:send"},
		"days": 365})["key"].(string) // outlives the month ahead
	send := func(idem string) response {
		return e.do("POST", inboxPath(box)+"/messages/send", key, map[string]any{"to": []string{"x@far.example"},
			"subject": "s", "text": "t", "idempotencyKey": idem})
	}
	qt.Assert(t, send("k1").status, qt.Equals, http.StatusOK)
	qt.Assert(t, send("k2").errCode(t), qt.Equals, "rate_limited") // one a day
	used := func() float64 {
		for _, f := range e.ok("getUsage", "GET", "/v1/usage", key, nil)["features"].([]any) {
			if f.(map[string]any)["feature"] == "sends" {
				return f.(map[string]any)["used"].(float64)
			}
		}
		return -1
	}
	qt.Assert(t, used(), qt.Equals, 1.0)
	e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 32 * 86400})
	qt.Assert(t, send("k2").status, qt.Equals, http.StatusOK) // a new window
	qt.Assert(t, used(), qt.Equals, 1.0)                      // and a new month: this send only
}

// A key revoked or an account disabled through the test controls ends the streams open
// with it; a wait asked with the disabled account's key is refused.
func TestRevokeAndDisableReachOpenStreamsAndWaits(t *testing.T) {
	clock, faults := &db.Clock{}, &mail.Faults{}
	e := newEnvWith(t, serverOptions{now: clock.Now, mail: func(c *mail.Config) { c.Faults = faults },
		api: func(c *server.Config) {
			c.TestControls, c.Clock, c.Faults = true, clock, faults
			c.Streams.KeepAlive, c.Streams.Reauth = 100*time.Millisecond, 100*time.Millisecond
		}})
	box := e.createInbox("desk")
	k := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"messages:read"}})
	revoked := e.openStream(k["key"].(string), "")
	disabled := e.openStream(e.full, "")
	other := e.openStream(e.other, "")
	e.ok("revokeTestKey", "DELETE", "/_inboxd/keys/"+k["keyId"].(string), "", nil)
	revoked.ends()
	e.ok("disableAccount", "POST", "/_inboxd/accounts/acme/disable", "", nil)
	disabled.ends()
	qt.Assert(t, other.comment(), qt.Equals, "keep-alive") // another account's stream goes on
	e.fails(http.StatusForbidden, "access_denied", "GET", inboxPath(box)+"/messages/wait?since=2026-01-01T00:00:00Z&timeout=1", e.full, nil)
}

// After a reset, a stream resumed from before it gets the events the reset kept, not the
// ones of the mail it took away.
func TestAResetTakesItsMailsEventsOffTheStream(t *testing.T) {
	clock, faults := &db.Clock{}, &mail.Faults{}
	e := newEnvWith(t, serverOptions{now: clock.Now, mail: func(c *mail.Config) { c.Faults = faults },
		api: func(c *server.Config) {
			c.TestControls, c.Clock, c.Faults = true, clock, faults
			c.Streams.KeepAlive = 100 * time.Millisecond
		}})
	box := e.createInbox("desk")
	live := e.openStream(e.full, "")
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "seeded", "text": "kept"})
	seeded := live.next()
	qt.Assert(t, e.store.SnapshotForReset(context.Background()), qt.IsNil)
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "later", "text": "taken away"})
	live.next() // the hub holds it now
	e.ok("resetServer", "POST", "/_inboxd/reset", "", nil)
	resumed := e.openStream(e.full, "", "Last-Event-ID", seeded.id)
	resumed.quiet(300 * time.Millisecond)
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "after", "text": "new"})
	qt.Assert(t, e.payload(resumed.next())["message"].(map[string]any)["subject"], qt.Equals, "after")
}

// A webhook created through the API between two resets is gone after the second, and mail
// arriving next is received (and fanned out to the webhooks the reset kept) as usual.
func TestMailArrivesAfterAResetTookAWebhookAway(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	kept := e.ok("createWebhook", "POST", "/v1/webhooks", e.full, map[string]any{"url": "http://127.0.0.1:9/kept"})
	qt.Assert(t, e.store.SnapshotForReset(context.Background()), qt.IsNil)
	e.ok("createWebhook", "POST", "/v1/webhooks", e.full, map[string]any{"url": "http://127.0.0.1:9/later"})
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "before", "text": "fanned out to both"})

	e.ok("resetServer", "POST", "/_inboxd/reset", "", nil)
	qt.Assert(t, e.ok("listWebhooks", "GET", "/v1/webhooks", e.full, nil)["webhooks"], qt.HasLen, 1)
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "after", "text": "fanned out to the kept one"})
	e.eventually("the kept webhook's delivery", func() bool {
		got := e.ok("listWebhookDeliveries", "GET", "/v1/webhooks/"+kept["webhookId"].(string)+"/deliveries", e.full, nil)
		return len(got["deliveries"].([]any)) == 1
	})
}

// Every refusal of injected fields names the field, as the schema's refusals do.
func TestInjectRefusalsNameTheField(t *testing.T) {
	e := newControlsEnv(t)
	path := controlInbox(e.createInbox("desk")) + "/messages"
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"from": "a@b.example", "color": "red"}, "color: "},
		{map[string]any{"from": "a@b.example", "inReplyTo": "no-brackets"}, "inReplyTo: "},
		{map[string]any{"from": "a@b.example", "references": []string{"<ok@b.example>", "no-brackets"}}, "references[1]: "},
		{map[string]any{"from": "a@b.example", "headers": []map[string]string{{"name": "X-A", "value": "1"}, {"name": "Subject", "value": "x"}}},
			"headers[1].name: "},
		{map[string]any{"from": "a@b.example", "headers": []map[string]string{{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}}},
			"headers[1].name: "},
		{map[string]any{"from": "a@b.example", "attachments": []map[string]string{{"filename": "a.txt", "content": "%%"}}},
			"attachments[0].content: "},
	} {
		r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", path, "", c.body)
		qt.Check(t, r.json(t)["error"].(map[string]any)["message"], qt.Matches, regexp.QuoteMeta(c.field)+".+")
	}
	// A header field the fields write, or the server writes, says where it comes from.
	for name, says := range map[string]string{"Reply-To": "the replyTo field", "Message-ID": "raw MIME"} {
		r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", path, "", map[string]any{"from": "a@b.example",
			"headers": []map[string]string{{"name": name, "value": "<x@b.example>"}}})
		qt.Check(t, r.json(t)["error"].(map[string]any)["message"], qt.Contains, says)
	}
}

// An injected verdict is one the service could give (API-NOTES section 9): quarantined
// exactly when there are reasons, infected exactly with malware, unscannable exactly with
// scan_incomplete, a release only on a released message; a fixture is held to the same.
func TestInjectRefusesAnInconsistentVerdict(t *testing.T) {
	e := newControlsEnv(t)
	path := controlInbox(e.createInbox("desk")) + "/messages"
	verdict := func(status, av string, reasons []any, more ...any) map[string]any {
		p := map[string]any{"status": status, "scannedAt": "2026-09-20T18:07:46.000Z",
			"authentication": map[string]any{"spf": "pass", "dkim": "pass", "dmarc": "pass", "signingDomains": []any{}},
			"spam":           map[string]any{"score": 1, "threshold": 6}, "antivirus": map[string]any{"status": av, "signatures": []any{}},
			"reasons": reasons}
		for i := 0; i+1 < len(more); i += 2 {
			p[more[i].(string)] = more[i+1]
		}
		return map[string]any{"from": "a@b.example", "protection": p}
	}
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{verdict("quarantined", "clean", []any{}), "protection.reasons: "},
		{verdict("clean", "clean", []any{"spam"}), "protection.reasons: "},
		{verdict("quarantined", "clean", []any{"malware"}), "protection.reasons: "},
		{verdict("quarantined", "infected", []any{"spam"}), "protection.reasons: "},
		{verdict("quarantined", "unscannable", []any{"spam"}), "protection.reasons: "},
		{verdict("clean", "clean", []any{}, "releasedBy", "ann"), "protection.releasedBy: "},
	} {
		r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", path, "", c.body)
		qt.Check(t, r.json(t)["error"].(map[string]any)["message"], qt.Matches, regexp.QuoteMeta(c.field)+".+")
	}
	e.injected("desk@inboxd.test", verdict("quarantined", "infected", []any{"malware"}))
	e.injected("desk@inboxd.test", verdict("released", "clean", []any{}, "releasedBy", "ann", "releasedAt", "2026-09-21T08:00:00.000Z"))
}

// With --protection off received mail is never quarantined and has no protection field
// (extensions section 7), an injected verdict included: there is no scan to replace.
func TestProtectionOffIgnoresAnInjectedVerdict(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	held := map[string]any{"status": "quarantined", "scannedAt": "2026-09-20T18:07:46.000Z",
		"authentication": map[string]any{"spf": "fail", "dkim": "none", "dmarc": "fail", "signingDomains": []any{}},
		"spam":           map[string]any{"score": 9.5, "threshold": 6}, "antivirus": map[string]any{"status": "clean", "signatures": []any{}},
		"reasons": []any{"spam"}}
	e.injected(box, map[string]any{"from": "eve@spam.example", "subject": "You won", "text": "click", "protection": held})
	list := e.ok("listMessages", "GET", inboxPath(box)+"/messages", e.full, nil)["messages"].([]any)
	qt.Assert(t, list, qt.HasLen, 1)
	m := list[0].(map[string]any)
	qt.Assert(t, m["labels"], qt.DeepEquals, []any{"received", "unread"})
	_, scanned := m["protection"]
	qt.Assert(t, scanned, qt.IsFalse)
	qt.Assert(t, m["senderAuthentication"], qt.Equals, "unchecked")
}

// Moving the clock past a webhook delivery's next attempt makes that attempt now, as it
// does for outbound mail: a test does not wait out the backoff in real time.
func TestTheClockBringsAWebhookRetryForward(t *testing.T) {
	clock, faults := &db.Clock{}, &mail.Faults{}
	e := newHookEnv(t, webhook.Config{Backoff: func(int) time.Duration { return time.Hour }, Clock: clock},
		serverOptions{now: clock.Now, mail: func(c *mail.Config) { c.Faults = faults },
			api: func(c *server.Config) { c.TestControls, c.Clock, c.Faults = true, clock, faults }})
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	box := e.createInbox("desk")
	hook := e.ok("createWebhook", "POST", "/v1/webhooks", e.full, map[string]any{"url": rc.URL})["webhookId"].(string)
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "hi", "text": "hello"})
	e.waitDelivery(hook, func(d map[string]any) bool { return d["attempt"] == 1.0 })
	e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 3601})
	e.waitDelivery(hook, status("delivered"))
}

// The clock moves forward only, by at most ten years at a time; a refusal says which bound
// was crossed.
func TestAdvanceClockRefusalsSayTheBounds(t *testing.T) {
	e := newControlsEnv(t)
	for _, secs := range []float64{0, -5, 1e12} {
		r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": secs})
		qt.Check(t, r.json(t)["error"].(map[string]any)["message"], qt.Equals,
			"advanceSeconds: must be a number greater than 0 and at most 315360000")
	}
}

// documentedStatuses are the statuses /openapi.json lists for the operation at method and
// path.
func (e *env) documentedStatuses(method, path string) []string {
	e.t.Helper()
	doc := e.do("GET", "/openapi.json", "", nil).json(e.t)
	op := doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	var out []string
	for status := range op["responses"].(map[string]any) {
		out = append(out, status)
	}
	return out
}

// A control's refusals are among the answers /openapi.json lists for it: a mailbox key of
// a deleted inbox is inbox_retired 410, the outbox of an unknown inbox not_found 404.
func TestControlRefusalsAreDocumented(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	e.ok("deleteInbox", "DELETE", inboxPath(box), e.full, nil)
	e.fails(http.StatusGone, "inbox_retired", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "inboxId": box})
	qt.Check(t, e.documentedStatuses("POST", "/_inboxd/keys"), qt.Contains, "410")
	e.fails(http.StatusNotFound, "not_found", "GET", "/_inboxd/outbox?inboxId=nobody%40inboxd.test", "", nil)
	qt.Check(t, e.documentedStatuses("GET", "/_inboxd/outbox"), qt.Contains, "404")
}

// Moving the clock past the events' retention expires the cursors of the events it
// passed, as those days would: a resumed stream is cursor_expired 410, not a replay. A
// reset then brings back the start's events, and a stream resumes among them again.
func TestTheClockMovesEventRetention(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	key := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"messages:read"},
		"days": 365})["key"].(string) // outlives the week ahead
	live := e.openStream(key, "")
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "first", "text": "a"})
	first := live.next()
	qt.Assert(t, e.store.SnapshotForReset(context.Background()), qt.IsNil) // what the server takes at start
	e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "second", "text": "b"})
	live.next()
	e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 8 * 86400})
	qt.Assert(t, e.streamStatus(key, "", "Last-Event-ID", first.id), qt.Equals, http.StatusGone)
	e.fails(http.StatusGone, "cursor_expired", "GET", "/v1/events", key, nil, "Last-Event-ID", first.id)

	e.ok("resetServer", "POST", "/_inboxd/reset", "", nil)
	qt.Assert(t, e.streamStatus(key, "?lastEventId=0"), qt.Equals, http.StatusOK)
	resumed := e.openStream(key, "?lastEventId=0")
	qt.Assert(t, e.payload(resumed.next())["message"].(map[string]any)["subject"], qt.Equals, "first")
}
