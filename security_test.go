package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"
)

// The header-injection, size-limit and page-token rules of issue 8, checked on the whole
// program as a client and a hostile sender meet it: over HTTP and SMTP, with a relay that
// records what would leave the machine.

const otherKey = "bze_securitytest-0000-other-account-key-01"

// secServer is the program with SMTP in and a recording relay out, and two accounts:
// "crash" (crashKey: sink@ and agent@) and "other" (otherKey: elsewhere@).
type secServer struct {
	*faultServer
	relay *recordingRelay
}

func startSecServer(t *testing.T) *secServer {
	relay := &recordingRelay{got: map[string]string{}}
	rs := smtp.NewServer(relay)
	rs.ErrorLog = nopLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	go rs.Serve(ln)
	t.Cleanup(func() { rs.Close() })
	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.json")
	var msgs []string
	for i := range 3 {
		msgs = append(msgs, fmt.Sprintf(`{"messageId": "<m%d@customer.example>", "from": "ann@customer.example", "subject": "m%d", "text": "x",
			"timestamp": "2026-11-02T09:0%d:00Z"}`, i, i, i))
	}
	all := `["inboxes:read", "inboxes:write", "messages:read", "messages:send", "messages:write"]`
	qt.Assert(t, os.WriteFile(fixture, []byte(`{"accounts": [
		{"id": "crash", "plan": "exempt", "keys": [{"token": "`+crashKey+`", "scopes": `+all+`}],
		 "inboxes": [{"address": "sink@{domain}", "messages": [`+strings.Join(msgs, ",")+`]}, {"address": "agent@{domain}"}]},
		{"id": "other", "plan": "exempt", "keys": [{"token": "`+otherKey+`", "scopes": `+all+`}],
		 "inboxes": [{"address": "elsewhere@{domain}", "messages": [`+strings.Join(msgs, ",")+`]}]}]}`), 0o644), qt.IsNil)
	m := &Main{DBPath: filepath.Join(dir, "inboxd.db"), HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0", Domain: "inboxd.test",
		DNS: "off", Seeds: []string{fixture}, Relay: "smtp://" + ln.Addr().String()}
	qt.Assert(t, m.Run(context.Background()), qt.IsNil)
	t.Cleanup(func() { m.Close() })
	return &secServer{faultServer: &faultServer{t: t, m: m, base: "http://" + m.Addr()}, relay: relay}
}

// refused asserts a 422 invalid_argument whose message names field first.
func refused(t *testing.T, field string, status int, body []byte) {
	t.Helper()
	qt.Assert(t, status, qt.Equals, 422, qt.Commentf("%s", body))
	var e struct {
		Error struct{ Code, Message string }
	}
	qt.Assert(t, json.Unmarshal(body, &e), qt.IsNil)
	qt.Assert(t, e.Error.Code, qt.Equals, "invalid_argument")
	qt.Assert(t, strings.HasPrefix(e.Error.Message, field+": "), qt.IsTrue, qt.Commentf("%s", e.Error.Message))
}

// TestHeaderFieldsRefuseLineBreaks sends CR or LF in every field that ends up in a mail
// header: each request is refused naming the field, and nothing reaches the relay.
func TestHeaderFieldsRefuseLineBreaks(t *testing.T) {
	t.Parallel()
	s := startSecServer(t)
	const agent = "/v1/inboxes/agent%40inboxd.test"
	send := func(change func(map[string]any)) (int, []byte) {
		body := map[string]any{"to": []string{"friend@far.example"}, "subject": "Hi", "text": "Hello", "idempotencyKey": fmt.Sprint(time.Now().UnixNano()),
			"attachments": []map[string]any{{"filename": "a.txt", "contentType": "text/plain", "content": "aGk="}}}
		change(body)
		return s.do("POST", agent+"/messages/send", body)
	}
	attachment := func(b map[string]any) map[string]any { return b["attachments"].([]map[string]any)[0] }
	for _, tc := range []struct {
		field  string
		change func(map[string]any)
	}{
		{"subject", func(b map[string]any) { b["subject"] = "Hi\r\nBcc: victim@evil.example" }},
		{"subject", func(b map[string]any) { b["subject"] = "Hi\nBcc: victim@evil.example" }},
		{"subject", func(b map[string]any) { b["subject"] = "Hi\rBcc: victim@evil.example" }},
		{"to[0]", func(b map[string]any) { b["to"] = []string{"friend@far.example\r\nBcc: victim@evil.example"} }},
		{"cc[0]", func(b map[string]any) { b["cc"] = []string{"Friend\r\n <friend@far.example>"} }},
		{"bcc[0]", func(b map[string]any) { b["bcc"] = []string{"friend@far.example\n"} }},
		{"attachments[0].filename", func(b map[string]any) { attachment(b)["filename"] = "a.txt\r\nContent-Type: text/html" }},
		{"attachments[0].filename", func(b map[string]any) { attachment(b)["filename"] = "a\n.txt" }},
		{"attachments[0].contentType", func(b map[string]any) { attachment(b)["contentType"] = "text/plain\r\nX-Evil: 1" }},
	} {
		status, body := send(tc.change)
		refused(t, tc.field, status, body)
	}
	status, body := s.do("POST", "/v1/inboxes", map[string]any{"username": "bot", "displayName": "Bot\r\nBcc: victim@evil.example"})
	refused(t, "displayName", status, body)
	status, body = s.do("PATCH", agent, map[string]any{"displayName": "Agent\nX-Evil: 1"})
	refused(t, "displayName", status, body)
	status, body = s.do("POST", "/v1/inboxes/sink%40inboxd.test/messages/%3Cm0%40customer.example%3E/reply",
		map[string]any{"text": "x", "to": []string{"ann@customer.example\r\nBcc: victim@evil.example"}, "idempotencyKey": "r1"})
	refused(t, "to[0]", status, body)

	// Nothing was stored as sent, and nothing left.
	status, body = s.do("GET", agent+"/messages", nil)
	qt.Assert(t, status, qt.Equals, 200)
	qt.Assert(t, string(body), qt.JSONEquals, map[string]any{"messages": []any{}})
	s.relay.mu.Lock()
	defer s.relay.mu.Unlock()
	qt.Assert(t, s.relay.got, qt.HasLen, 0)
}

// TestHostileSenderCannotInjectHeaders: a sender can write anything in encoded words. A
// Subject and an attachment name that decode to line breaks are stored as one line, a
// reply carries a clean Subject (no header of the sender's making), and the download's
// Content-Disposition stays one header.
func TestHostileSenderCannotInjectHeaders(t *testing.T) {
	t.Parallel()
	s := startSecServer(t)
	raw := "From: Mallory <mallory@evil.example>\r\nTo: sink@inboxd.test\r\nMessage-ID: <hostile@evil.example>\r\n" +
		"Subject: =?utf-8?q?Invoice=0D=0ABcc:_victim@evil.example?=\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nPay me.\r\n" +
		"--b\r\nContent-Type: application/octet-stream\r\n" +
		"Content-Disposition: attachment; filename*=utf-8''a%0D%0AContent-Type%3A%20text%2Fhtml.txt\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\naGk=\r\n--b--\r\n"
	cl, err := smtpDial(s.m.SMTPAddrListening())
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, cl.SendMail("mallory@evil.example", []string{"sink@inboxd.test"}, strings.NewReader(raw)), qt.IsNil)
	cl.Close()

	const msg = "/v1/inboxes/sink%40inboxd.test/messages/%3Chostile%40evil.example%3E"
	status, body := s.do("GET", msg, nil)
	qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s", body))
	var m struct {
		Subject     string
		Attachments []struct{ AttachmentID, Filename string }
	}
	qt.Assert(t, json.Unmarshal(body, &m), qt.IsNil)
	qt.Assert(t, strings.ContainsAny(m.Subject, "\r\n"), qt.IsFalse, qt.Commentf("%q", m.Subject))
	qt.Assert(t, m.Attachments, qt.HasLen, 1)
	qt.Assert(t, strings.ContainsAny(m.Attachments[0].Filename, "\r\n"), qt.IsFalse, qt.Commentf("%q", m.Attachments[0].Filename))

	// The download link: one Content-Disposition, no header of the sender's.
	status, body = s.do("GET", msg+"/attachments/"+m.Attachments[0].AttachmentID, nil)
	qt.Assert(t, status, qt.Equals, 200)
	var link struct{ DownloadURL string }
	qt.Assert(t, json.Unmarshal(body, &link), qt.IsNil)
	u, err := url.Parse(link.DownloadURL)
	qt.Assert(t, err, qt.IsNil)
	conn, err := net.Dial("tcp", s.m.Addr())
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", u.RequestURI())
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, res.StatusCode, qt.Equals, 200)
	qt.Assert(t, res.Header.Values("Content-Disposition"), qt.HasLen, 1)
	qt.Assert(t, res.Header.Get("Content-Type"), qt.Equals, "application/octet-stream")
	res.Body.Close()

	// A reply keeps the subject on one line and adds no Bcc.
	status, body = s.do("POST", msg+"/reply", map[string]any{"text": "No.", "idempotencyKey": "hostile-1"})
	qt.Assert(t, status, qt.Equals, 200, qt.Commentf("%s", body))
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.relay.mu.Lock()
		out, ok := s.relay.got["mallory@evil.example"]
		n := len(s.relay.got)
		s.relay.mu.Unlock()
		if ok {
			qt.Assert(t, n, qt.Equals, 1) // no victim@evil.example
			head, _, _ := strings.Cut(out, "\r\n\r\n")
			qt.Assert(t, strings.Count(head, "\r\nSubject:"), qt.Equals, 1, qt.Commentf("%s", head))
			qt.Assert(t, strings.Contains(strings.ToLower(head), "\r\nbcc:"), qt.IsFalse, qt.Commentf("%s", head))
			break
		}
		qt.Assert(t, time.Now().Before(deadline), qt.IsTrue, qt.Commentf("the reply never reached the relay"))
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBodyLimitBeforeReading: a request that announces a body over 5 MiB is answered 413
// at once, without the server waiting for (or reading) the body.
func TestBodyLimitBeforeReading(t *testing.T) {
	t.Parallel()
	s := startSecServer(t)
	conn, err := net.Dial("tcp", s.m.Addr())
	qt.Assert(t, err, qt.IsNil)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/inboxes/agent%%40inboxd.test/messages/send HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"to\":", crashKey, 6<<20)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	qt.Assert(t, err, qt.IsNil, qt.Commentf("no answer before the body was sent"))
	qt.Assert(t, res.StatusCode, qt.Equals, 413)
	res.Body.Close()
}

// TestPageTokensStayInTheirList: a message page token of one account's inbox is refused on
// another account's inbox (and that account cannot list the first inbox at all).
func TestPageTokensStayInTheirList(t *testing.T) {
	t.Parallel()
	s := startSecServer(t)
	status, body := s.do("GET", "/v1/inboxes/sink%40inboxd.test/messages?limit=1", nil)
	qt.Assert(t, status, qt.Equals, 200)
	var page struct{ NextPageToken string }
	qt.Assert(t, json.Unmarshal(body, &page), qt.IsNil)
	qt.Assert(t, page.NextPageToken, qt.Not(qt.Equals), "")
	other := func(path string) (int, []byte) {
		req, _ := http.NewRequest("GET", s.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+otherKey)
		res, err := http.DefaultClient.Do(req)
		qt.Assert(t, err, qt.IsNil)
		defer res.Body.Close()
		var b strings.Builder
		bufio.NewReader(res.Body).WriteTo(&b)
		return res.StatusCode, []byte(b.String())
	}
	tok := url.QueryEscape(page.NextPageToken)
	status, body = other("/v1/inboxes/elsewhere%40inboxd.test/messages?limit=1&pageToken=" + tok)
	refused(t, "pageToken", status, body)
	status, _ = other("/v1/inboxes/sink%40inboxd.test/messages?limit=1&pageToken=" + tok)
	qt.Assert(t, status, qt.Equals, 404)
	// Nor does it carry over to another list of the same inbox.
	status, body = s.do("GET", "/v1/inboxes/sink%40inboxd.test/threads?limit=1&pageToken="+tok, nil)
	refused(t, "pageToken", status, body)
}
