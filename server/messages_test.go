package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
)

// deliver stores a received message in an inbox directly, as the receive pipeline would.
func (e *env) deliver(addr string, n db.NewMessage) {
	e.t.Helper()
	in, err := e.store.InboxByAddress(context.Background(), "acme", addr)
	qt.Assert(e.t, err, qt.IsNil)
	n.InboxID = in.ID
	if n.Direction == "" {
		n.Direction = db.Received
	}
	if n.Timestamp.IsZero() {
		n.Timestamp = time.Now()
	}
	if n.Preview == "" {
		n.Preview = mail.Preview(n.Text)
	}
	n.Labels = db.InitialLabels(n.Direction, n.Protection != nil && n.Protection.Status == db.ProtectionQuarantined, n.Labels)
	_, err = db.Deliver(context.Background(), e.store, []db.NewMessage{n})
	qt.Assert(e.t, err, qt.IsNil)
}

func msgPath(addr, id string) string { return inboxPath(addr) + "/messages/" + url.PathEscape(id) }

func ids(list map[string]any, key string) []string {
	var out []string
	for _, m := range list[key].([]any) {
		mm := m.(map[string]any)
		if id, ok := mm["messageId"]; ok {
			out = append(out, id.(string))
		} else {
			out = append(out, mm["threadId"].(string))
		}
	}
	return out
}

func complete(category string, reply *bool, urgency *string) *db.Triage {
	dur, trunc := int64(5), false
	probs := map[string]float64{"billing": 0, "support": 0, "sales": 0, "personal": 0, "notification": 0, "other": 0}
	probs[category] = 1
	return &db.Triage{
		Status: db.TriageComplete, Version: 1, Model: "test-model", AnalyzedAt: "2026-11-01T00:00:00.000Z",
		DurationMs: &dur, BodyTruncated: &trunc, Usage: &db.TriageUsage{InputTokens: 1, OutputTokens: 1},
		Category:   &db.TriageCategory{Value: category, Confidence: 1, Probabilities: probs},
		NeedsReply: &db.TriageNeedsReply{Value: reply, Probability: 0.5},
		Urgency:    &db.TriageUrgency{Value: urgency, Score: 1, Confidence: 0.9, Probabilities: map[string]float64{"0": 0, "1": 1, "2": 0, "3": 0}},
	}
}

func ptr[T any](v T) *T { return &v }

func TestOddMessageIDsRoute(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("ops")
	for _, id := range []string{"<a/b%c@x.test>", "<q?x#y+z@x.test>", "<search@x.test>"} {
		e.deliver(in, db.NewMessage{MessageID: id, From: "s@x.test", To: []string{in}, Subject: id, Text: "t"})
		m := e.ok("getMessage", "GET", msgPath(in, id), e.full, nil)
		qt.Assert(t, m["messageId"], qt.Equals, id)
	}
	e.fails(404, "not_found", "GET", msgPath(in, "<missing@x.test>"), e.full, nil)
}

func TestLabelsTrashAndQuarantine(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	base := time.Now().Add(-time.Hour)
	e.deliver(in, db.NewMessage{MessageID: "<m1@x.test>", From: "a@x.test", Subject: "one", Text: "first", Timestamp: base})
	e.deliver(in, db.NewMessage{MessageID: "<m2@x.test>", From: "b@x.test", Subject: "two", Text: "second", Timestamp: base.Add(time.Minute)})
	e.deliver(in, db.NewMessage{MessageID: "<spam@x.test>", From: "c@x.test", Subject: "prize", Text: "click", Timestamp: base.Add(2 * time.Minute),
		Triage: complete("sales", ptr(false), ptr("low")),
		Protection: &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: "2026-11-01T00:00:00.000Z",
			Authentication: db.Authentication{SPF: "fail", DKIM: "none", DMARC: "fail", SigningDomains: []string{}},
			Spam:           db.Spam{Score: 9, Threshold: 6}, Antivirus: db.Antivirus{Status: "clean", Signatures: []string{}}, Reasons: []string{"spam"}}})

	list := e.ok("listMessages", "GET", inboxPath(in)+"/messages", e.full, nil)
	c.Assert(ids(list, "messages"), qt.DeepEquals, []string{"<m2@x.test>", "<m1@x.test>"}) // newest first, quarantine hidden

	q := e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=quarantined", e.full, nil)
	c.Assert(ids(q, "messages"), qt.DeepEquals, []string{"<spam@x.test>"})
	qm := q["messages"].([]any)[0].(map[string]any)
	c.Assert(qm["labels"], qt.DeepEquals, []any{"quarantined"})
	c.Assert(qm["preview"], qt.Equals, "")
	c.Assert(qm["triage"], qt.IsNil)
	c.Assert(qm["protection"].(map[string]any)["status"], qt.Equals, "quarantined")
	// Triage filters never match a quarantined message.
	c.Assert(e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=quarantined&category=sales", e.full, nil)["messages"], qt.HasLen, 0)

	// An account key reads the quarantined body; a mailbox key does not.
	c.Assert(e.ok("getMessage", "GET", msgPath(in, "<spam@x.test>"), e.full, nil)["text"], qt.Equals, "click")
	mbox := e.mailboxKey("acme", in)
	_, hasText := e.ok("getMessage", "GET", msgPath(in, "<spam@x.test>"), mbox, nil)["text"]
	c.Assert(hasText, qt.IsFalse)

	// Nobody changes quarantine through the API, and nobody replies to it.
	e.fails(403, "quarantine_review_required", "PATCH", msgPath(in, "<spam@x.test>")+"/labels", e.full, map[string]any{"removeLabels": []string{"quarantined"}})
	e.fails(403, "quarantine_review_required", "PATCH", msgPath(in, "<m1@x.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"quarantined"}})
	e.fails(403, "message_quarantined", "POST", msgPath(in, "<spam@x.test>")+"/reply", e.full, map[string]any{"text": "no", "idempotencyKey": "q"})

	// Trash hides a message unless asked for; add and remove of one label: removal wins.
	r := e.do("PATCH", msgPath(in, "<m1@x.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"trash", "keep", "x"}, "removeLabels": []string{"unread", "x"}})
	c.Assert(r.status, qt.Equals, 200)
	c.Assert(strings.TrimSpace(string(r.body)), qt.Equals, "null")
	c.Assert(ids(e.ok("listMessages", "GET", inboxPath(in)+"/messages", e.full, nil), "messages"), qt.DeepEquals, []string{"<m2@x.test>"})
	trashed := e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=trash", e.full, nil)
	c.Assert(trashed["messages"].([]any)[0].(map[string]any)["labels"], qt.DeepEquals, []any{"keep", "received", "trash"})

	// A thread whose messages are all trashed is hidden from listThreads unless includeTrash.
	threads := e.ok("listThreads", "GET", inboxPath(in)+"/threads", e.full, nil)
	c.Assert(threads["threads"], qt.HasLen, 1)
	c.Assert(e.ok("listThreads", "GET", inboxPath(in)+"/threads?includeTrash=true", e.full, nil)["threads"], qt.HasLen, 2)
	c.Assert(e.ok("listThreads", "GET", inboxPath(in)+"/threads?labels=quarantined", e.full, nil)["threads"], qt.HasLen, 1)

	// Thread labels apply to every message of the thread.
	tid := threads["threads"].([]any)[0].(map[string]any)["threadId"].(string)
	e.ok("updateThreadLabels", "PATCH", inboxPath(in)+"/threads/"+tid+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	c.Assert(e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=vip", e.full, nil)["messages"], qt.HasLen, 1)
	e.fails(404, "not_found", "PATCH", inboxPath(in)+"/threads/00000000-0000-4000-8000-000000000000/labels", e.full, map[string]any{})
	e.fails(404, "not_found", "PATCH", msgPath(in, "<nope@x.test>")+"/labels", e.full, map[string]any{})
}

func TestTriageFilters(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	base := time.Now().Add(-time.Hour)
	add := func(id string, tri *db.Triage, i int) {
		e.deliver(in, db.NewMessage{MessageID: id, From: "a@x.test", Subject: id, Text: "t", Timestamp: base.Add(time.Duration(i) * time.Minute), Triage: tri})
	}
	add("<bill-yes@x>", complete("billing", ptr(true), ptr("high")), 1)
	add("<bill-unsure@x>", complete("billing", nil, nil), 2)
	add("<support-no@x>", complete("support", ptr(false), ptr("low")), 3)
	add("<pending@x>", &db.Triage{Status: db.TriagePending}, 4)
	add("<failed@x>", &db.Triage{Status: db.TriageFailed, Code: "provider_unavailable", FailedAt: "2026-11-01T00:00:00.000Z"}, 5)
	add("<none@x>", nil, 6)

	get := func(q string) []string {
		return ids(e.ok("listMessages", "GET", inboxPath(in)+"/messages?"+q, e.full, nil), "messages")
	}
	c.Assert(get("category=billing"), qt.DeepEquals, []string{"<bill-unsure@x>", "<bill-yes@x>"})
	c.Assert(get("needsReply=yes"), qt.DeepEquals, []string{"<bill-yes@x>"})
	c.Assert(get("needsReply=no"), qt.DeepEquals, []string{"<support-no@x>"})
	c.Assert(get("needsReply=uncertain"), qt.DeepEquals, []string{"<bill-unsure@x>"})
	c.Assert(get("urgency=high"), qt.DeepEquals, []string{"<bill-yes@x>"})
	c.Assert(get("category=billing&needsReply=yes&urgency=high"), qt.DeepEquals, []string{"<bill-yes@x>"})
	c.Assert(get("category=other"), qt.HasLen, 0)
	c.Assert(get(""), qt.HasLen, 6)
	// Thread filters apply to each thread's latest message.
	c.Assert(e.ok("listThreads", "GET", inboxPath(in)+"/threads?category=billing", e.full, nil)["threads"], qt.HasLen, 2)
}

func TestMessagePaginationHasNoGapsOrRepeats(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	same := time.Now().Add(-time.Hour) // identical timestamps: order falls back to the id
	for i := 0; i < 45; i++ {
		e.deliver(in, db.NewMessage{MessageID: fmt.Sprintf("<m%02d@x>", i), From: "a@x.test", Subject: "s", Text: "t", Timestamp: same.Add(time.Duration(i%3) * time.Second)})
	}
	for _, kind := range []string{"messages", "threads"} {
		seen := map[string]bool{}
		token := ""
		for {
			path := inboxPath(in) + "/" + kind + "?limit=7"
			if token != "" {
				path += "&pageToken=" + url.QueryEscape(token)
			}
			op := map[string]string{"messages": "listMessages", "threads": "listThreads"}[kind]
			page := e.ok(op, "GET", path, e.full, nil)
			for _, id := range ids(page, kind) {
				c.Assert(seen[id], qt.IsFalse, qt.Commentf("%s repeated", id))
				seen[id] = true
			}
			next, ok := page["nextPageToken"].(string)
			if !ok {
				break
			}
			c.Assert(len(next) <= 200, qt.IsTrue)
			token = next
		}
		c.Assert(seen, qt.HasLen, 45)
	}
}

func TestIdempotency(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	send := map[string]any{"to": []string{"x@example.test"}, "subject": "hi", "text": "hello", "idempotencyKey": "once"}
	first := e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, send)
	again := e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, send)
	c.Assert(again["messageId"], qt.Equals, first["messageId"])
	c.Assert(again["deduplicated"], qt.Equals, true)
	changed := map[string]any{"to": []string{"x@example.test"}, "subject": "hi", "text": "changed", "idempotencyKey": "once"}
	e.fails(409, "idempotency_conflict", "POST", inboxPath(in)+"/messages/send", e.full, changed)
	// Lists given empty are lists left out, and labels are a set: the same request.
	explicit := map[string]any{"to": []string{"x@example.test"}, "subject": "hi", "text": "hello", "idempotencyKey": "once",
		"cc": []string{}, "bcc": []string{}, "labels": []string{}, "attachments": []any{}}
	c.Assert(e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, explicit)["messageId"], qt.Equals, first["messageId"])
	labelled := map[string]any{"to": []string{"z@example.test"}, "text": "tagged", "labels": []string{"b", "a"}, "idempotencyKey": "labels"}
	l1 := e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, labelled)
	labelled["labels"] = []string{"a", "b", "a"}
	c.Assert(e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, labelled)["messageId"], qt.Equals, l1["messageId"])

	// The header may carry the key; header and body must agree.
	noKey := map[string]any{"to": []string{"x@example.test"}, "text": "via header"}
	h := e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, noKey, "Idempotency-Key", "hdr")
	h2 := e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, noKey, "Idempotency-Key", "hdr")
	c.Assert(h2["messageId"], qt.Equals, h["messageId"])
	e.fails(400, "invalid_request", "POST", inboxPath(in)+"/messages/send", e.full, send, "Idempotency-Key", "different")

	// Concurrent identical requests store exactly one message.
	body := map[string]any{"to": []string{"y@example.test"}, "text": "race", "idempotencyKey": "race"}
	var wg sync.WaitGroup
	results := make([]string, 12)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := e.do("POST", inboxPath(in)+"/messages/send", e.full, body)
			if r.status == 200 {
				results[i] = r.json(t)["messageId"].(string)
			} else {
				results[i] = string(r.body)
			}
		}(i)
	}
	wg.Wait()
	for _, r := range results {
		c.Assert(r, qt.Equals, results[0])
	}
	sent := e.ok("listMessages", "GET", inboxPath(in)+"/messages?labels=sent", e.full, nil)
	c.Assert(sent["messages"], qt.HasLen, 4)
}

func TestReplyRecipients(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("desk")
	e.deliver(in, db.NewMessage{MessageID: "<q@cust.test>", From: "ann@cust.test", To: []string{in, "bob@cust.test"}, Cc: []string{"cat@cust.test"},
		ReplyTo: []string{"tickets@cust.test"}, Subject: "RE: order", Text: "where is it", References: []string{"<root@cust.test>"}})
	all := e.ok("reply", "POST", msgPath(in, "<q@cust.test>")+"/reply", e.full, map[string]any{"text": "soon", "replyAll": true, "idempotencyKey": "r"})
	m := e.ok("getMessage", "GET", msgPath(in, all["messageId"].(string)), e.full, nil)
	c.Assert(m["to"], qt.DeepEquals, []any{"tickets@cust.test"})
	c.Assert(m["cc"], qt.DeepEquals, []any{"bob@cust.test", "cat@cust.test"})
	c.Assert(m["subject"], qt.Equals, "RE: order")
	c.Assert(m["labels"], qt.DeepEquals, []any{"sent"})
	c.Assert(m["delivery"].(map[string]any)["recipients"], qt.HasLen, 3)
	e.fails(404, "not_found", "POST", msgPath(in, "<none@x>")+"/reply", e.full, map[string]any{"text": "x", "idempotencyKey": "n"})
	e.fails(422, "invalid_reply", "POST", msgPath(in, "<q@cust.test>")+"/reply", e.full, map[string]any{"text": "x", "to": []string{in}, "idempotencyKey": "self"})
}

func TestAttachmentDownload(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	content := []byte("%PDF-1.4 invoice bytes")
	e.deliver(in, db.NewMessage{MessageID: "<att@x>", From: "a@x.test", Subject: "invoice", Text: "see attached",
		Attachments: []db.NewAttachment{{Filename: "invoice 1.pdf", ContentType: "application/pdf", Content: content}}})
	m := e.ok("getMessage", "GET", msgPath(in, "<att@x>"), e.full, nil)
	att := m["attachments"].([]any)[0].(map[string]any)
	c.Assert(att["size"], qt.Equals, float64(len(content)))
	link := e.ok("getAttachment", "GET", msgPath(in, "<att@x>")+"/attachments/"+att["attachmentId"].(string), e.full, nil)
	e.ok("getAttachment", "GET", msgPath(in, "<att@x>")+"/attachments/"+strings.ToUpper(att["attachmentId"].(string)), e.full, nil)
	c.Assert(link["filename"], qt.Equals, "invoice 1.pdf")
	dl := link["downloadUrl"].(string)
	c.Assert(strings.HasPrefix(dl, "http://api.test/attachments/"), qt.IsTrue)
	path := strings.TrimPrefix(dl, "http://api.test")

	r := e.do("GET", path, "", nil) // no key needed
	c.Assert(r.status, qt.Equals, 200)
	c.Assert(string(r.body), qt.Equals, string(content))
	c.Assert(r.header.Get("Content-Disposition"), qt.Equals, "attachment; filename*=UTF-8''invoice%201.pdf")
	c.Assert(r.header.Get("X-Content-Type-Options"), qt.Equals, "nosniff")
	// A broken download resumes: a range of the bytes is 206 with just those.
	r = e.do("GET", path, "", nil, "Range", "bytes=5-12")
	c.Assert(r.status, qt.Equals, http.StatusPartialContent)
	c.Assert(string(r.body), qt.Equals, string(content[5:13]))
	c.Assert(r.header.Get("Content-Range"), qt.Equals, fmt.Sprintf("bytes 5-12/%d", len(content)))

	tampered := strings.Replace(path, "signature=", "signature=0", 1)
	e.fails(401, "unauthorized", "GET", tampered, "", nil)
	u, _ := url.Parse(path)
	q := u.Query()
	q.Set("expires", fmt.Sprint(time.Now().Add(time.Hour).Unix()))
	u.RawQuery = q.Encode()
	e.fails(401, "unauthorized", "GET", u.String(), "", nil)
	e.fails(404, "not_found", "GET", msgPath(in, "<att@x>")+"/attachments/00000000-0000-4000-8000-000000000000", e.full, nil)

	// Attachments of a message whose antivirus verdict is not clean never leave the server.
	e.deliver(in, db.NewMessage{MessageID: "<virus@x>", From: "a@x.test", Subject: "v", Text: "v",
		Protection: &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: "2026-11-01T00:00:00Z",
			Authentication: db.Authentication{SPF: "pass", DKIM: "pass", DMARC: "pass", SigningDomains: []string{}},
			Spam:           db.Spam{Score: 0, Threshold: 6}, Antivirus: db.Antivirus{Status: "infected", Signatures: []string{"Eicar-Test-Signature"}}, Reasons: []string{"malware"}},
		Attachments: []db.NewAttachment{{Filename: "eicar.com", ContentType: "application/octet-stream", Content: []byte("X5O")}}})
	vm := e.ok("getMessage", "GET", msgPath(in, "<virus@x>"), e.full, nil)
	vid := vm["attachments"].([]any)[0].(map[string]any)["attachmentId"].(string)
	e.fails(403, "message_quarantined", "GET", msgPath(in, "<virus@x>")+"/attachments/"+vid, e.full, nil)
}

func TestSendAttachmentsArriveLocally(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	a, b := e.createInbox("a"), e.createInbox("b")
	payload := []byte("hello, attachment")
	res := e.ok("send", "POST", inboxPath(a)+"/messages/send", e.full, map[string]any{"to": []string{b}, "subject": "file", "html": "<p>see <b>file</b></p>",
		"idempotencyKey": "f", "attachments": []any{map[string]any{"filename": "note.txt", "contentType": "text/plain", "content": base64.StdEncoding.EncodeToString(payload)}}})
	var got map[string]any
	e.eventually("delivery", func() bool {
		r := e.do("GET", msgPath(b, res["messageId"].(string))+"?includeHtml=true", e.full, nil)
		if r.status != 200 {
			return false
		}
		got = r.json(t)
		return true
	})
	c.Assert(got["attachments"], qt.HasLen, 1)
	c.Assert(got["html"], qt.Contains, "<b>file</b>")
	c.Assert(got["text"], qt.Contains, "file")
	withoutHTML := e.ok("getMessage", "GET", msgPath(b, res["messageId"].(string)), e.full, nil)
	_, hasHTML := withoutHTML["html"]
	c.Assert(hasHTML, qt.IsFalse)
}

func TestUsageAndBillingLimit(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	u := e.ok("getUsage", "GET", "/v1/usage", e.full, nil)
	c.Assert(u["billing"], qt.Equals, "metered")
	c.Assert(u["plan"].(map[string]any)["planId"], qt.Equals, "developer")
	c.Assert(u["inboxes"].(map[string]any)["count"], qt.Equals, 1.0)
	c.Assert(u["plans"], qt.HasLen, 3)

	ctx := context.Background()
	c.Assert(e.store.SetUsage(ctx, "acme", db.FeatureSends, 10000), qt.IsNil)
	body := map[string]any{"to": []string{"x@example.test"}, "text": "x", "idempotencyKey": "over"}
	e.fails(402, "billing_limit", "POST", inboxPath(in)+"/messages/send", e.full, body)
	c.Assert(e.store.SetUsage(ctx, "acme", db.FeatureSends, 9999), qt.IsNil)
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, body)
	// A retry of a committed send answers again even with the allowance spent.
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, body)
	sends := e.ok("getUsage", "GET", "/v1/usage", e.full, nil)["features"].([]any)[1].(map[string]any)
	c.Assert(sends["feature"], qt.Equals, "sends")
	c.Assert(sends["remaining"], qt.Equals, 0.0)

	// The plan's inbox allowance: developer includes 10.
	for i := 2; i <= 10; i++ {
		e.createInbox(fmt.Sprintf("in%d", i))
	}
	e.fails(402, "billing_limit", "POST", "/v1/inboxes", e.full, map[string]any{"username": "eleven"})
}

func TestRateLimit(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := newServer(t, serverOptions{noIndex: true, mail: func(c *mail.Config) { c.SendLimit = 2 }})
	store, srv := s.store, s.api
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "a", Plan: db.PlanExempt}, nil), qt.IsNil)
	key := db.GenerateAccountToken()
	c.Assert(db.CreateKey(ctx, store, db.NewKey{AccountID: "a", Token: key, Scopes: db.AllScopes()}), qt.IsNil)
	_, err := db.CreateInbox(ctx, store, db.NewInbox{AccountID: "a", Address: "r@inboxd.test", DefaultDomain: testDomain})
	c.Assert(err, qt.IsNil)
	send := func(k string) *http.Response {
		req, _ := http.NewRequest("POST", "/v1/inboxes/r%40inboxd.test/messages/send",
			strings.NewReader(`{"to":["x@example.test"],"text":"x","idempotencyKey":"`+k+`"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		w := &recorder{header: http.Header{}}
		srv.ServeHTTP(w, req)
		return &http.Response{StatusCode: w.status, Header: w.header}
	}
	c.Assert(send("1").StatusCode, qt.Equals, 200)
	c.Assert(send("2").StatusCode, qt.Equals, 200)
	limited := send("3")
	c.Assert(limited.StatusCode, qt.Equals, 429)
	c.Assert(limited.Header.Get("Retry-After"), qt.Not(qt.Equals), "")
	c.Assert(send("1").StatusCode, qt.Equals, 200) // a retry of a committed send is not a new send
}

type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func TestGetThreadBodiesAndSizeCap(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.createInbox("ops")
	base := time.Now().Add(-time.Hour)
	e.deliver(in, db.NewMessage{MessageID: "<t1@x>", From: "a@x.test", To: []string{in}, Subject: "q", Text: "question", HTML: "<p>question</p>", Timestamp: base})
	e.deliver(in, db.NewMessage{MessageID: "<t2@x>", From: "b@x.test", To: []string{in}, Cc: []string{"c@x.test"}, Subject: "Re: q", Text: "answer",
		Timestamp: base.Add(time.Minute), ThreadCandidates: []string{"<t1@x>"}})
	m := e.ok("getMessage", "GET", msgPath(in, "<t1@x>"), e.full, nil)
	tid := m["threadId"].(string)
	plain := e.ok("getThread", "GET", inboxPath(in)+"/threads/"+tid, e.full, nil)
	c.Assert(plain["messageCount"], qt.Equals, 2.0)
	c.Assert(plain["senders"], qt.DeepEquals, []any{"a@x.test", "b@x.test"})
	c.Assert(plain["recipients"], qt.DeepEquals, []any{in, "c@x.test"})
	c.Assert(plain["lastMessageId"], qt.Equals, "<t2@x>")
	// A UUID is the same UUID in capitals (RFC 9562).
	upper := e.ok("getThread", "GET", inboxPath(in)+"/threads/"+strings.ToUpper(tid), e.full, nil)
	c.Assert(upper["threadId"], qt.Equals, tid)
	first := plain["messages"].([]any)[0].(map[string]any)
	c.Assert(first["messageId"], qt.Equals, "<t1@x>") // oldest first
	_, hasText := first["text"]
	c.Assert(hasText, qt.IsFalse)
	bodies := e.ok("getThread", "GET", inboxPath(in)+"/threads/"+tid+"?includeBodies=true", e.full, nil)
	first = bodies["messages"].([]any)[0].(map[string]any)
	c.Assert(first["text"], qt.Equals, "question")
	c.Assert(first["html"], qt.Equals, "<p>question</p>")
	e.fails(404, "not_found", "GET", inboxPath(in)+"/threads/00000000-0000-4000-8000-000000000000", e.full, nil)

	big := make([]db.NewMessage, db.MaxThreadMessages+1)
	inbox, err := e.store.InboxByAddress(context.Background(), "acme", in)
	c.Assert(err, qt.IsNil)
	for i := range big {
		big[i] = db.NewMessage{InboxID: inbox.ID, MessageID: fmt.Sprintf("<big%d@x>", i), Direction: db.Received, From: "a@x.test",
			Subject: "s", Text: "t", Timestamp: base, ThreadCandidates: []string{"<big0@x>"}, Labels: []string{"received"}}
	}
	_, err = db.Deliver(context.Background(), e.store, big)
	c.Assert(err, qt.IsNil)
	bt := e.ok("getMessage", "GET", msgPath(in, "<big0@x>"), e.full, nil)["threadId"].(string)
	e.fails(413, "thread_too_large", "GET", inboxPath(in)+"/threads/"+bt, e.full, nil)
}
