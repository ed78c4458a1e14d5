package server_test

import (
	"net/http"
	"net/smtp"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

func (e *env) setFaults(rules ...map[string]any) map[string]any {
	e.t.Helper()
	return e.ok("setFaults", "PUT", "/_inboxd/faults", "", map[string]any{"rules": rules})
}

func TestFaultRulesAreCheckedKeptAndCleared(t *testing.T) {
	e := newControlsEnv(t)
	for _, bad := range []map[string]any{
		{"target": "api", "match": map[string]any{"operation": "nosuchOp"}, "effect": map[string]any{"status": 503, "code": "unavailable", "transient": true}},
		{"target": "api", "effect": map[string]any{"status": 503, "code": "unavailable", "transient": true, "delayMs": 10}},
		{"target": "api", "effect": map[string]any{"status": 503}},
		{"target": "delivery", "effect": map[string]any{"smtpCode": 550, "timeout": true}},
		{"target": "delivery", "match": map[string]any{"stage": "rcpt"}, "effect": map[string]any{"smtpCode": 550}},
		{"target": "smtp", "match": map[string]any{"stage": "helo"}, "effect": map[string]any{"smtpCode": 550}},
		{"target": "triage", "effect": map[string]any{"failure": "bored"}},
		{"target": "dns", "effect": map[string]any{"smtpCode": 550}},
		{"target": "delivery", "match": map[string]any{"recipient": "[x"}, "effect": map[string]any{"smtpCode": 550}},
		{"target": "delivery", "effect": map[string]any{"smtpCode": 550}, "probability": 2},
	} {
		e.fails(http.StatusUnprocessableEntity, "invalid_argument", "PUT", "/_inboxd/faults", "", map[string]any{"rules": []any{bad}})
	}
	qt.Assert(t, e.ok("getFaults", "GET", "/_inboxd/faults", "", nil)["rules"], qt.HasLen, 0) // nothing kept of a refused set
	e.setFaults(map[string]any{"target": "api", "match": map[string]any{"operation": "listInboxes"},
		"effect": map[string]any{"status": 503, "code": "unavailable", "transient": true}, "times": 2})
	e.fails(http.StatusServiceUnavailable, "unavailable", "GET", "/v1/inboxes", e.full, nil)
	r := e.fails(http.StatusServiceUnavailable, "unavailable", "GET", "/v1/inboxes", e.full, nil)
	qt.Assert(t, string(r.body), qt.Contains, `"transient":true`)
	e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil) // spent
	rules := e.ok("getFaults", "GET", "/_inboxd/faults", "", nil)["rules"].([]any)
	qt.Assert(t, rules[0].(map[string]any)["times"], qt.Equals, 0.0)
	e.ok("clearFaults", "DELETE", "/_inboxd/faults", "", nil)
	qt.Assert(t, e.ok("getFaults", "GET", "/_inboxd/faults", "", nil)["rules"], qt.HasLen, 0)

	e.setFaults(map[string]any{"target": "api", "match": map[string]any{"operation": "getUsage"}, "effect": map[string]any{"delayMs": 300}})
	start := time.Now()
	e.ok("getUsage", "GET", "/v1/usage", e.full, nil)
	qt.Assert(t, time.Since(start) >= 300*time.Millisecond, qt.IsTrue)
	e.setFaults(map[string]any{"target": "api", "effect": map[string]any{"status": 500, "code": "internal_error", "transient": true}, "probability": 0})
	e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil) // probability 0 never fires
}

func TestDeliveryFaultsBounceAndDefer(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	e.setFaults(
		map[string]any{"target": "delivery", "match": map[string]any{"recipient": "*@bounce.test"},
			"effect": map[string]any{"smtpCode": 550, "enhancedCode": "5.1.1", "message": "no such user"}},
		map[string]any{"target": "delivery", "match": map[string]any{"recipient": "slow@*"}, "effect": map[string]any{"smtpCode": 451}})
	status := func(id, rcpt string) string {
		m := e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(id), e.full, nil)
		for _, r := range m["delivery"].(map[string]any)["recipients"].([]any) {
			if r.(map[string]any)["recipient"] == rcpt {
				return r.(map[string]any)["status"].(string)
			}
		}
		return ""
	}
	sent := e.ok("send", "POST", inboxPath(box)+"/messages/send", e.full, map[string]any{
		"to": []string{"ann@bounce.test", "slow@far.example", "ok@far.example"}, "subject": "s", "text": "t", "idempotencyKey": "k1"})
	id := sent["messageId"].(string)
	e.eventually("the bounce", func() bool { return status(id, "ann@bounce.test") == "bounced" })
	e.eventually("the deferral", func() bool { return status(id, "slow@far.example") == "deferred" })
	e.eventually("the delivery", func() bool { return status(id, "ok@far.example") == "delivered" })
	m := e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(id), e.full, nil)
	qt.Assert(t, m["labels"], qt.Contains, "bounced")
}

func TestSMTPFaultsAnswerAStage(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	e.setFaults(map[string]any{"target": "smtp", "match": map[string]any{"stage": "rcpt", "recipient": "desk@*"},
		"effect": map[string]any{"smtpCode": 452, "message": "Mailbox busy"}, "times": 1})
	msg := "From: ann@customer.example\r\nTo: " + box + "\r\nSubject: hi\r\nMessage-ID: <f1@customer.example>\r\n\r\nhello\r\n"
	err := smtp.SendMail(e.smtpAddr, nil, "ann@customer.example", []string{box}, []byte(msg))
	qt.Assert(t, err, qt.ErrorMatches, `452 "4.0.0 Mailbox busy"`)
	qt.Assert(t, smtp.SendMail(e.smtpAddr, nil, "ann@customer.example", []string{box}, []byte(msg)), qt.IsNil) // spent

	e.setFaults(map[string]any{"target": "smtp", "match": map[string]any{"stage": "data"}, "effect": map[string]any{"smtpCode": 554}})
	err = smtp.SendMail(e.smtpAddr, nil, "ann@customer.example", []string{box}, []byte(strings.Replace(msg, "<f1@", "<f2@", 1)))
	qt.Assert(t, err, qt.ErrorMatches, `554 .*`)
	qt.Assert(t, e.ok("listMessages", "GET", inboxPath(box)+"/messages", e.full, nil)["messages"], qt.HasLen, 1)

	// At connect, the answer is the greeting, as a server that takes no mail gives it.
	e.setFaults(map[string]any{"target": "smtp", "match": map[string]any{"stage": "connect"},
		"effect": map[string]any{"smtpCode": 554, "message": "No SMTP service here"}, "times": 1})
	_, err = smtp.Dial(e.smtpAddr)
	qt.Assert(t, err, qt.ErrorMatches, `554 "5.0.0 No SMTP service here"`)
	c, err := smtp.Dial(e.smtpAddr) // spent
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, c.Quit(), qt.IsNil)
}

func TestTriageFaultsFailNewMail(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	e.setFaults(map[string]any{"target": "triage", "match": map[string]any{"recipient": box}, "effect": map[string]any{"failure": "provider_unavailable"}})
	got := e.injected(box, map[string]any{"from": "ann@customer.example", "subject": "hi", "text": "hello"})
	m := e.ok("getMessage", "GET", inboxPath(box)+"/messages/"+url.PathEscape(got["messageId"].(string)), e.full, nil)
	triage := m["triage"].(map[string]any)
	qt.Assert(t, triage["status"], qt.Equals, "failed")
	qt.Assert(t, triage["code"], qt.Equals, "provider_unavailable")
}

// A rule that could never fire is refused, naming the field: a sender or recipient at a
// stage that does not know it yet, an enhanced code of another class than the reply's.
func TestFaultRulesThatCouldNeverFireAreRefused(t *testing.T) {
	e := newControlsEnv(t)
	for _, c := range []struct {
		rule  map[string]any
		field string
	}{
		{map[string]any{"target": "smtp", "match": map[string]any{"stage": "connect", "sender": "*@spam.example"}, "effect": map[string]any{"smtpCode": 554}},
			"rules[0].match: "},
		{map[string]any{"target": "smtp", "match": map[string]any{"stage": "connect", "recipient": "desk@*"}, "effect": map[string]any{"smtpCode": 554}},
			"rules[0].match: "},
		{map[string]any{"target": "smtp", "match": map[string]any{"stage": "mail", "recipient": "desk@*"}, "effect": map[string]any{"smtpCode": 550}},
			"rules[0].match.recipient: "},
		{map[string]any{"target": "delivery", "effect": map[string]any{"smtpCode": 550, "enhancedCode": "4.2.2"}},
			"rules[0].effect.enhancedCode: "},
	} {
		r := e.fails(http.StatusUnprocessableEntity, "invalid_argument", "PUT", "/_inboxd/faults", "", map[string]any{"rules": []any{c.rule}})
		qt.Check(t, r.json(t)["error"].(map[string]any)["message"], qt.Matches, regexp.QuoteMeta(c.field)+".+")
	}
	e.setFaults(map[string]any{"target": "smtp", "match": map[string]any{"stage": "rcpt", "sender": "*@spam.example", "recipient": "desk@*"},
		"effect": map[string]any{"smtpCode": 550}})
	e.setFaults(map[string]any{"target": "delivery", "effect": map[string]any{"smtpCode": 452, "enhancedCode": "4.2.2"}})
}
