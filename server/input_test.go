package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// errMessage is the message of an error response.
func errMessage(t *testing.T, r response) string {
	t.Helper()
	msg, _ := r.json(t)["error"].(map[string]any)["message"].(string)
	return msg
}

// A label with a control character is refused wherever a label enters: send, reply, both
// label updates, the list filters and the MCP tools, naming the label; nothing is written.
func TestLabelsRefuseControlCharacters(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	e.deliver(in, db.NewMessage{MessageID: "<m@x.test>", From: "a@x.test", Subject: "s", Text: "t"})
	thread := e.ok("getMessage", "GET", msgPath(in, "<m@x.test>"), e.full, nil)["threadId"].(string)
	const rule = ": must be a label of 1-64 characters without control characters"
	for _, label := range []string{"a\nb", "x\r\nBcc: evil@example.test", "\x1b[2Jred", "tab\there", "del\x7f", "next\u0085line"} {
		pair := []string{"ok", label}
		for _, tt := range []struct {
			method, path, field string
			body                map[string]any
		}{
			{"POST", inboxPath(in) + "/messages/send", "labels[1]", map[string]any{"to": []string{"x@example.test"}, "text": "hi", "idempotencyKey": "k", "labels": pair}},
			{"POST", msgPath(in, "<m@x.test>") + "/reply", "labels[1]", map[string]any{"text": "hi", "idempotencyKey": "r", "labels": pair}},
			{"PATCH", msgPath(in, "<m@x.test>") + "/labels", "addLabels[1]", map[string]any{"addLabels": pair}},
			{"PATCH", msgPath(in, "<m@x.test>") + "/labels", "removeLabels[1]", map[string]any{"removeLabels": pair}},
			{"PATCH", inboxPath(in) + "/threads/" + thread + "/labels", "addLabels[1]", map[string]any{"addLabels": pair}},
			{"PATCH", inboxPath(in) + "/threads/" + thread + "/labels", "removeLabels[1]", map[string]any{"removeLabels": pair}},
		} {
			r := e.fails(422, "invalid_argument", tt.method, tt.path, e.full, tt.body)
			c.Check(errMessage(t, r), qt.Equals, tt.field+rule, qt.Commentf("%s %q", tt.path, label))
		}
		for _, list := range []string{"/messages", "/threads"} {
			r := e.fails(422, "invalid_argument", "GET", inboxPath(in)+list+"?labels=ok&labels="+url.QueryEscape(label), e.full, nil)
			c.Check(errMessage(t, r), qt.Equals, "labels[1]"+rule)
		}
	}
	cs := e.mcpSession(e.full)
	err := toolFails(t, cs, 422, "invalid_argument", "update_message_labels", map[string]any{"inboxId": in, "messageId": "<m@x.test>", "addLabels": []string{"a\nb"}})
	c.Check(err["message"], qt.Equals, "addLabels[0]"+rule)
	err = toolFails(t, cs, 422, "invalid_argument", "list_threads", map[string]any{"inboxId": in, "labels": []string{"\x1b"}})
	c.Check(err["message"], qt.Equals, "labels[0]"+rule)

	// Nothing was sent or relabelled.
	c.Assert(e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=sent", e.full, nil)["messages"], qt.HasLen, 0)
	c.Assert(e.ok("getMessage", "GET", msgPath(in, "<m@x.test>"), e.full, nil)["labels"], qt.DeepEquals, []any{"received", "unread"})
}

// A quarantined message waits for a person: while it is held no key can add or remove any
// of its labels, directly or through its thread (403 quarantine_review_required), and
// nothing is written. It is alone in its thread, so a thread update never reaches it
// beside other mail.
func TestQuarantinedMessageLabelsAreFrozen(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	e := newEnv(t)
	in := e.createInbox("ops")
	e.deliver(in, db.NewMessage{MessageID: "<spam@x.test>", From: "c@x.test", Subject: "prize", Text: "click",
		Protection: &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: "2026-11-01T00:00:00.000Z",
			Authentication: db.Authentication{SPF: "fail", DKIM: "none", DMARC: "fail", SigningDomains: []string{}},
			Spam:           db.Spam{Score: 9, Threshold: 6}, Antivirus: db.Antivirus{Status: "clean", Signatures: []string{}}, Reasons: []string{"spam"}}})
	// Mail that refers to the held message starts a thread of its own.
	e.deliver(in, db.NewMessage{MessageID: "<re@x.test>", From: "c@x.test", Subject: "Re: prize", Text: "?", ThreadCandidates: []string{"<spam@x.test>"}})
	spamPath := msgPath(in, "<spam@x.test>")
	held := e.ok("getMessage", "GET", spamPath, e.full, nil)
	spamThread := inboxPath(in) + "/threads/" + held["threadId"].(string)
	other := e.ok("getMessage", "GET", msgPath(in, "<re@x.test>"), e.full, nil)
	c.Assert(other["threadId"], qt.Not(qt.Equals), held["threadId"])
	c.Assert(e.ok("getThread", "GET", spamThread, e.full, nil)["messageCount"], qt.Equals, 1.0)

	mailbox := e.mailboxKey("acme", in)
	for _, change := range []map[string]any{
		{"addLabels": []string{"received"}},
		{"addLabels": []string{"sent"}},
		{"addLabels": []string{"trash"}},
		{"addLabels": []string{"QUARANTINED"}},
		{"addLabels": []string{"unread", "custom"}},
		{"removeLabels": []string{"trash"}}, // one it does not carry
		{"addLabels": []string{"x"}, "removeLabels": []string{"x"}},
		{"removeLabels": []string{"quarantined"}},
	} {
		for _, key := range []string{e.full, mailbox} {
			e.fails(403, "quarantine_review_required", "PATCH", spamPath+"/labels", key, change)
			e.fails(403, "quarantine_review_required", "PATCH", spamThread+"/labels", key, change)
		}
	}
	cs := e.mcpSession(e.full)
	toolFails(t, cs, 403, "quarantine_review_required", "update_message_labels", map[string]any{"inboxId": in, "messageId": "<spam@x.test>", "addLabels": []string{"trash"}})
	toolFails(t, cs, 403, "quarantine_review_required", "update_thread_labels", map[string]any{"inboxId": in, "threadId": held["threadId"], "addLabels": []string{"trash"}})

	// Nothing was written: the message and its thread carry only quarantined.
	c.Assert(e.ok("getMessage", "GET", spamPath, e.full, nil)["labels"], qt.DeepEquals, []any{"quarantined"})
	c.Assert(e.ok("getThread", "GET", spamThread, e.full, nil)["labels"], qt.DeepEquals, []any{"quarantined"})
	// An empty change asks for nothing and gets nothing.
	e.ok("updateMessageLabels", "PATCH", spamPath+"/labels", e.full, map[string]any{})
	// Other mail is labelled as ever.
	e.ok("updateThreadLabels", "PATCH", inboxPath(in)+"/threads/"+other["threadId"].(string)+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	c.Assert(e.ok("getMessage", "GET", msgPath(in, "<re@x.test>"), e.full, nil)["labels"], qt.DeepEquals, []any{"received", "unread", "vip"})

	// Once a person releases it, it is ordinary mail again.
	items, _, err := e.store.ListQuarantined(ctx, db.QuarantineFilter{Inbox: in})
	c.Assert(err, qt.IsNil)
	c.Assert(items, qt.HasLen, 1)
	released, err := db.ReleaseMessage(ctx, e.store, items[0].UUID, db.Actor{Name: "admin"})
	c.Assert(err, qt.IsNil)
	c.Assert(released, qt.IsTrue)
	e.ok("updateMessageLabels", "PATCH", spamPath+"/labels", e.full, map[string]any{"removeLabels": []string{"unread"}, "addLabels": []string{"checked"}})
	c.Assert(e.ok("getMessage", "GET", spamPath, e.full, nil)["labels"], qt.DeepEquals, []any{"checked", "received"})
}

// A key repeated within one JSON object is refused (422 invalid_argument naming the key by
// its path), in every body: REST, with or without the Idempotency-Key header, and MCP
// tool arguments; a JSON-RPC message that repeats its own members is an Invalid Request.
// Before, the last value won: two "to" fields sent to the second.
func TestDuplicateKeysRefused(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	e.deliver(in, db.NewMessage{MessageID: "<m@x.test>", From: "a@x.test", Subject: "s", Text: "t"})
	const twice = ": appears more than once in its object; give each key once"
	att := `{"filename":"a.txt","contentType":"text/plain","content":"aGk="}`
	for _, tt := range []struct {
		method, path, body, field string
		headers                   []string
	}{
		{"POST", inboxPath(in) + "/messages/send", `{"to":["first@example.test"],"text":"hi","idempotencyKey":"k1","to":["second@example.test"]}`, "to", nil},
		{"POST", inboxPath(in) + "/messages/send", `{"to":["first@example.test"],"text":"hi","t\u006f":["second@example.test"]}`, "to", []string{"Idempotency-Key", "k2"}},
		{"POST", inboxPath(in) + "/messages/send", `{"to":["a@example.test"],"text":"hi","idempotencyKey":"k3","attachments":[` + att + `,{"filename":"b.txt","contentType":"text/plain","filename":"b.exe","content":""}]}`, "attachments[1].filename", nil},
		{"POST", msgPath(in, "<m@x.test>") + "/reply", `{"text":"yes","text":"no","idempotencyKey":"r1"}`, "text", nil},
		{"PATCH", msgPath(in, "<m@x.test>") + "/labels", `{"addLabels":["keep"],"addLabels":["trash"]}`, "addLabels", nil},
		{"PATCH", inboxPath(in), `{"group":"a","group":null}`, "group", nil},
		{"POST", "/v1/inboxes", `{"username":"one","username":"two"}`, "username", nil},
	} {
		r := e.fails(422, "invalid_argument", tt.method, tt.path, e.full, tt.body, tt.headers...)
		c.Check(errMessage(t, r), qt.Equals, tt.field+twice, qt.Commentf("%s", tt.body))
	}
	// Nothing was written.
	c.Assert(e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=sent", e.full, nil)["messages"], qt.HasLen, 0)
	c.Assert(e.ok("getMessage", "GET", msgPath(in, "<m@x.test>"), e.full, nil)["labels"], qt.DeepEquals, []any{"received", "unread"})
	c.Assert(e.ok("getInbox", "GET", inboxPath(in), e.full, nil)["group"], qt.IsNil)
	c.Assert(e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil)["inboxes"], qt.HasLen, 1)
	// The header still merges into a body that repeats nothing.
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, ` {"to": ["a@example.test"], "text": "hi"}`, "Idempotency-Key", "k4")
	r := e.fails(422, "invalid_argument", "POST", inboxPath(in)+"/messages/send", e.full, "{ \n}", "Idempotency-Key", "k5")
	c.Check(errMessage(t, r), qt.Equals, "to: is required")

	// MCP: a tool's arguments are a body like any other.
	call := func(id int, args string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"send","arguments":%s}}`, id, args)
	}
	for id, tt := range map[int]struct{ args, field string }{
		1: {`{"inboxId":"` + in + `","to":["first@example.test"],"text":"hi","idempotencyKey":"m1","to":["second@example.test"]}`, "to"},
		2: {`{"inboxId":"` + in + `","to":["a@example.test"],"text":"hi","idempotencyKey":"m2","attachments":[{"filename":"a","filename":"b","contentType":"text/plain","content":""}]}`, "attachments[0].filename"},
		3: {`{"inboxId":"` + in + `","inboxId":"other@inboxd.test","to":["a@example.test"],"text":"hi","idempotencyKey":"m3"}`, "inboxId"},
	} {
		r := e.mcpPost(e.full, call(id, tt.args))
		c.Assert(r.status, qt.Equals, 200, qt.Commentf("%s", r.body))
		var res struct {
			Result struct {
				IsError bool
				Content []struct{ Text string }
			}
		}
		c.Assert(json.Unmarshal(r.body, &res), qt.IsNil, qt.Commentf("%s", r.body))
		c.Assert(res.Result.IsError, qt.IsTrue, qt.Commentf("%s", r.body))
		c.Check(res.Result.Content[0].Text, qt.Equals, `{"error":{"code":"invalid_argument","message":"`+tt.field+twice+`","status":422,"transient":false}}`)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_usage","name":"delete_inbox","arguments":{"inboxId":"` + in + `"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list","method":"tools/call","params":{"name":"get_usage"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"send","arguments":{"x":1,"x":2},"arguments":{}}}`,
	} {
		r := e.mcpPost(e.full, body)
		c.Assert(r.status, qt.Equals, 400, qt.Commentf("%s", r.body))
		rpcErr := r.json(t)["error"].(map[string]any)
		c.Check(rpcErr["code"], qt.Equals, -32600.0)
		c.Check(rpcErr["message"], qt.Matches, `Invalid Request: (params\.name|method|params\.arguments)`+twice)
	}
	c.Assert(e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=sent", e.full, nil)["messages"], qt.HasLen, 1) // k4 alone
	e.ok("getInbox", "GET", inboxPath(in), e.full, nil)                                                                 // not deleted
}

// HEAD answers wherever GET does, with GET's status and headers (Content-Length,
// Content-Type, Content-Disposition, ...) and no body. It has none of GET's effects: a
// HEAD of a held message's review page is not a view in the audit log.
func TestHeadAnswersLikeGet(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	in := d.inbox
	d.deliver(in, db.NewMessage{MessageID: "<att@x>", From: "a@x.test", Subject: "invoice", Text: "see attached",
		Attachments: []db.NewAttachment{{Filename: "invoice 1.pdf", ContentType: "application/pdf", Content: []byte("%PDF-1.4 invoice")}}})
	m := d.ok("getMessage", "GET", msgPath(in, "<att@x>"), d.full, nil)
	attPath := msgPath(in, "<att@x>") + "/attachments/" + m["attachments"].([]any)[0].(map[string]any)["attachmentId"].(string)
	download := strings.TrimPrefix(d.ok("getAttachment", "GET", attPath, d.full, nil)["downloadUrl"].(string), d.url)
	d.receive(spamMail("spam@x"))
	b := d.browser()
	b.loggedIn()
	review := "/dashboard/messages/" + b.reviewID("WINNER")
	anonymous := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	fetch := func(client *http.Client, method, path, key string) page {
		req, err := http.NewRequest(method, d.url+path, nil)
		c.Assert(err, qt.IsNil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := client.Do(req)
		c.Assert(err, qt.IsNil)
		return readPage(t, res)
	}
	for _, tt := range []struct {
		path    string
		key     string
		session bool // the logged-in dashboard browser asks
		status  int
	}{
		{"/healthz", "", false, 200},
		{"/openapi.json", "", false, 200},
		{"/metrics", "", false, 200},
		{"/v1/inboxes", d.full, false, 200},
		{inboxPath(in), d.full, false, 200},
		{inboxPath(in) + "/messages?labels=unread&limit=5", d.full, false, 200},
		{msgPath(in, "<att@x>") + "?includeHtml=true", d.full, false, 200},
		{attPath, d.full, false, 200},
		{inboxPath(in) + "/threads", d.full, false, 200},
		{inboxPath(in) + "/threads/" + m["threadId"].(string), d.full, false, 200},
		{"/v1/usage", d.full, false, 200},
		{download, "", false, 200},
		{strings.Replace(download, "signature=", "signature=0", 1), "", false, 401},
		{msgPath(in, "<missing@x>"), d.full, false, 404},
		{inboxPath(in) + "/messages?limit=0", d.full, false, 422},
		{"/v1/inboxes", "", false, 401},
		{"/dashboard", "", false, 303},
		{"/dashboard/", "", false, 303},
		{"/dashboard/login", "", false, 200},
		{"/dashboard/static/style.css", "", false, 200},
		{"/dashboard/", "", true, 200},
		{review, "", true, 200},
		{"/dashboard/audit", "", true, 200},
	} {
		client := anonymous
		if tt.session {
			client = b.c
		}
		head := fetch(client, "HEAD", tt.path, tt.key)
		get := fetch(client, "GET", tt.path, tt.key)
		c.Check(get.status, qt.Equals, tt.status, qt.Commentf("GET %s: %s", tt.path, get.body))
		c.Check(head.status, qt.Equals, get.status, qt.Commentf("HEAD %s", tt.path))
		c.Check(head.body, qt.Equals, "", qt.Commentf("HEAD %s", tt.path))
		delete(get.header, "Date")
		delete(head.header, "Date")
		if tt.path == "/metrics" { // the counters of the HEAD itself are in the GET's body
			delete(get.header, "Content-Length")
		}
		if !tt.session && tt.path == "/dashboard/login" { // a new browser gets a new login token
			c.Check(head.header.Get("Set-Cookie"), qt.Matches, "inboxd_login=.*")
			delete(get.header, "Set-Cookie")
			delete(head.header, "Set-Cookie")
		}
		c.Check(head.header, qt.DeepEquals, get.header, qt.Commentf("HEAD %s", tt.path))
	}
	// The attachment's headers say what a GET delivers.
	dl := fetch(anonymous, "HEAD", download, "")
	c.Check(dl.header.Get("Content-Length"), qt.Equals, "16")
	c.Check(dl.header.Get("Content-Disposition"), qt.Equals, "attachment; filename*=UTF-8''invoice%201.pdf")
	// One view of the held message: the GET's, not the HEAD's.
	views := 0
	for _, a := range auditActions(t, d.store) {
		if a == "view" {
			views++
		}
	}
	c.Check(views, qt.Equals, 1)
	// Where there is no GET, HEAD is what it was: 404 on a POST-only or unknown path, 405
	// at /mcp.
	c.Check(fetch(anonymous, "HEAD", "/nowhere", "").status, qt.Equals, 404)
	c.Check(fetch(anonymous, "HEAD", inboxPath(in)+"/setup", d.full).status, qt.Equals, 404)
	c.Check(fetch(anonymous, "HEAD", "/mcp", d.full).status, qt.Equals, 405)
}
