package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func TestAuthErrors(t *testing.T) {
	e := newEnv(t)
	inbox := e.createInbox("ops")
	expired := db.GenerateAccountToken()
	past := time.Now().Add(-time.Hour)
	qt.Assert(t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: "acme", Token: expired, Scopes: db.AllScopes(), ExpiresAt: &past}), qt.IsNil)

	e.fails(404, "not_found", "GET", "/v1/nothing-here", "", nil) // unknown route: 404 before auth
	e.fails(404, "not_found", "PUT", "/v1/inboxes", e.full, nil)  // unknown method under /v1
	e.fails(401, "unauthorized", "GET", "/v1/inboxes", "", nil)
	e.fails(401, "unauthorized", "GET", "/v1/inboxes", "bze_not-a-real-key", nil)
	e.fails(401, "unauthorized", "GET", "/v1/inboxes", "sk_live_whatever", nil)
	e.fails(401, "unauthorized", "GET", "/v1/inboxes", expired, nil)
	e.fails(403, "forbidden", "POST", "/v1/inboxes", e.readOnly, map[string]any{"username": "x"})
	e.fails(403, "forbidden", "POST", inboxPath(inbox)+"/messages/send", e.readOnly,
		map[string]any{"to": []string{"a@b.test"}, "text": "x", "idempotencyKey": "k"})
	e.fails(404, "not_found", "GET", inboxPath(inbox), e.other, nil) // another account's inbox
	e.fails(404, "not_found", "GET", inboxPath("nobody@inboxd.test"), e.full, nil)
}

func TestRequestSyntaxErrors(t *testing.T) {
	e := newEnv(t)
	inbox := e.createInbox("ops")
	p := inboxPath(inbox)
	e.fails(400, "invalid_request", "POST", "/v1/inboxes", e.full, "{not json")
	e.fails(400, "invalid_request", "POST", "/v1/inboxes", e.full, "[1,2]")
	r := e.do("POST", "/v1/inboxes", e.full, `{"username":"x"}`, "Content-Type", "text/plain")
	qt.Assert(t, r.status, qt.Equals, http.StatusUnsupportedMediaType)
	qt.Assert(t, r.errCode(t), qt.Equals, "invalid_request")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"username":"x"}`))
	zw.Close()
	r = e.do("POST", "/v1/inboxes", e.full, gz.String(), "Content-Encoding", "gzip")
	qt.Assert(t, r.status, qt.Equals, http.StatusUnsupportedMediaType)
	qt.Assert(t, r.errCode(t), qt.Equals, "invalid_request")
	qt.Assert(t, string(r.body), qt.Contains, "Content-Encoding gzip is not accepted")
	e.ok("createInbox", "POST", "/v1/inboxes", e.full, `{"username":"identity"}`, "Content-Encoding", "identity")
	big := `{"username":"` + strings.Repeat("a", 6<<20) + `"}`
	e.fails(413, "payload_too_large", "POST", "/v1/inboxes", e.full, big)
	e.fails(400, "invalid_request", "POST", "/v1/inboxes?x=1", e.full, map[string]any{"username": "x"})
	e.fails(400, "invalid_request", "GET", p+"/messages?labels=%zz", e.full, nil)
	e.fails(400, "invalid_request", "GET", p+"/messages?limit=1&limit=2", e.full, nil)
	e.fails(422, "invalid_argument", "DELETE", p, e.full, map[string]any{"force": true}) // deleteInbox takes no body
	e.ok("getInbox", "GET", p, e.full, nil)                                              // and deleted nothing
}

func TestValidationNamesTheField(t *testing.T) {
	e := newEnv(t)
	inbox := e.createInbox("ops")
	p := inboxPath(inbox)
	cases := []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "/v1/inboxes", map[string]any{"username": "ok", "color": "red"}, "color"},
		{"POST", "/v1/inboxes", map[string]any{"username": "-bad"}, "username"},
		{"POST", "/v1/inboxes", map[string]any{}, "username"},
		{"PATCH", p, map[string]any{}, "group"},
		{"GET", "/v1/inboxes?limit=0", nil, "limit"},
		{"GET", "/v1/inboxes?limit=abc", nil, "limit"},
		{"GET", "/v1/inboxes?sort=asc", nil, "sort"},
		{"GET", p + "/messages?category=spam", nil, "category"},
		{"GET", p + "/messages?pageToken=forged", nil, "pageToken"},
		{"GET", "/v1/inboxes/not-an-email/messages", nil, "inboxId"},
		{"GET", p + "/threads/1234", nil, "threadId"},
		{"POST", p + "/messages/send", map[string]any{"to": []string{"not-an-address"}, "text": "x", "idempotencyKey": "k"}, "to"},
		{"POST", p + "/messages/send", map[string]any{"to": []string{"a@b.test"}, "idempotencyKey": "k"}, "text"},
		{"POST", p + "/messages/send", map[string]any{"to": []string{"a@b.test"}, "text": "x"}, "idempotencyKey"},
		{"POST", p + "/messages/send", map[string]any{"to": fifty(30), "cc": fifty(21), "text": "x", "idempotencyKey": "k"}, "cc"},
		{"POST", p + "/messages/send", map[string]any{"to": []string{"a@b.test"}, "text": strings.Repeat("x", 600<<10), "idempotencyKey": "k"}, "text"},
		{"POST", p + "/messages/send", map[string]any{"to": []string{"a@b.test"}, "text": "x", "idempotencyKey": "k",
			"attachments": []any{map[string]any{"filename": "a.txt", "contentType": "text/plain", "content": "aGk"}}}, "attachments[0].content"},
	}
	for _, tc := range cases {
		r := e.do(tc.method, tc.path, e.full, tc.body)
		qt.Assert(t, r.status, qt.Equals, 422, qt.Commentf("%s %s: %s", tc.method, tc.path, r.body))
		qt.Assert(t, r.errCode(t), qt.Equals, "invalid_argument")
		msg := r.json(t)["error"].(map[string]any)["message"].(string)
		qt.Assert(t, msg, qt.Contains, tc.field, qt.Commentf("%s %s", tc.method, tc.path))
	}
}

func fifty(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "user" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + "@example.test"
	}
	return out
}

func TestInboxLifecycle(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	in := e.ok("createInbox", "POST", "/v1/inboxes", e.full, map[string]any{"username": "Sales", "displayName": "Sales desk", "group": "team-a"})
	c.Assert(in["inboxId"], qt.Equals, "sales@inboxd.test")
	c.Assert(in["group"], qt.Equals, "team-a")
	c.Assert(in["deliveryStatus"], qt.Equals, "ready")
	c.Assert(in["setupAvailable"], qt.Equals, true)

	// Creating again returns the same inbox and keeps its group.
	again := e.ok("createInbox", "POST", "/v1/inboxes", e.full, map[string]any{"username": "sales", "group": "other"})
	c.Assert(again["group"], qt.Equals, "team-a")
	c.Assert(again["createdAt"], qt.Equals, in["createdAt"])

	// Another account cannot take the address.
	e.fails(409, "inbox_conflict", "POST", "/v1/inboxes", e.other, map[string]any{"username": "sales"})
	// A domain the account has not got is refused.
	e.fails(422, "domain_not_ready", "POST", "/v1/inboxes", e.full, map[string]any{"username": "x", "domain": "elsewhere.test"})

	p := inboxPath("sales@inboxd.test")
	up := e.ok("updateInbox", "PATCH", p, e.full, map[string]any{"group": nil})
	c.Assert(up["group"], qt.IsNil)
	c.Assert(e.ok("getInbox", "GET", p, e.full, nil)["group"], qt.IsNil)
	e.ok("finishInboxSetup", "POST", p+"/setup", e.full, nil)

	del := e.ok("deleteInbox", "DELETE", p, e.full, nil)
	c.Assert(del["deleted"], qt.Equals, true)
	e.fails(410, "inbox_retired", "GET", p, e.full, nil)
	e.fails(410, "inbox_retired", "GET", p+"/messages", e.full, nil)
	e.fails(409, "inbox_conflict", "POST", "/v1/inboxes", e.full, map[string]any{"username": "sales"})
	list := e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil)
	c.Assert(list["inboxes"], qt.HasLen, 0)
}

func TestInboxPagination(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	for _, u := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7"} {
		e.createInbox(u)
	}
	var seen []string
	token := ""
	pages := 0
	for {
		path := "/v1/inboxes?limit=3"
		if token != "" {
			path += "&pageToken=" + token
		}
		page := e.ok("listInboxes", "GET", path, e.full, nil)
		for _, in := range page["inboxes"].([]any) {
			seen = append(seen, in.(map[string]any)["inboxId"].(string))
		}
		pages++
		next, ok := page["nextPageToken"].(string)
		if !ok {
			break
		}
		// A token is bound to its account: another account's key cannot use it.
		e.fails(422, "invalid_argument", "GET", "/v1/inboxes?limit=3&pageToken="+next, e.other, nil)
		token = next
	}
	c.Assert(pages, qt.Equals, 3)
	c.Assert(seen, qt.DeepEquals, []string{"a1@inboxd.test", "a2@inboxd.test", "a3@inboxd.test", "a4@inboxd.test",
		"a5@inboxd.test", "a6@inboxd.test", "a7@inboxd.test"})
}

func TestMailboxKey(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	mine := e.createInbox("mine")
	theirs := e.createInbox("theirs")
	key := e.mailboxKey("acme", mine)

	list := e.ok("listInboxes", "GET", "/v1/inboxes", key, nil)
	c.Assert(list["inboxes"], qt.HasLen, 1)
	only := list["inboxes"].([]any)[0].(map[string]any)
	c.Assert(only["inboxId"], qt.Equals, mine)
	_, hasGroup := only["group"]
	c.Assert(hasGroup, qt.IsFalse)
	e.fails(422, "invalid_argument", "GET", "/v1/inboxes?group=x", key, nil)
	e.fails(422, "invalid_argument", "GET", "/v1/inboxes?pageToken=abc", key, nil)

	e.ok("getInbox", "GET", inboxPath(mine), key, nil)
	e.ok("listMessages", "GET", inboxPath(mine)+"/messages", key, nil)
	e.fails(403, "forbidden", "GET", inboxPath(theirs), key, nil)
	e.fails(403, "forbidden", "GET", inboxPath("ghost@inboxd.test")+"/messages", key, nil)
	e.fails(403, "forbidden", "POST", "/v1/inboxes", key, map[string]any{"username": "x"})
	e.fails(403, "forbidden", "DELETE", inboxPath(mine), key, nil)
	e.fails(403, "forbidden", "GET", "/v1/usage", key, nil)
	e.ok("send", "POST", inboxPath(mine)+"/messages/send", key, map[string]any{"to": []string{"x@example.test"}, "text": "hi", "idempotencyKey": "m1"})
}

func TestAbsentOperationSaysSo(t *testing.T) {
	e := newEnv(t)
	in := e.createInbox("ops")
	// A server built without a search index says searchMessages is not available.
	e.startAPI(nil)
	r := e.fails(404, "not_found", "GET", inboxPath(in)+"/messages/search?query=x", e.full, nil)
	qt.Assert(t, string(r.body), qt.Contains, "searchMessages is not available")
}

func TestAccountStateErrors(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	ctx := context.Background()
	one := 1
	c.Assert(db.EnsureAccount(ctx, e.store, db.Account{ID: "off", Plan: "team", Disabled: true}, nil), qt.IsNil)
	c.Assert(db.EnsureAccount(ctx, e.store, db.Account{ID: "quota", Plan: "team", InboxQuota: &one}, nil), qt.IsNil)
	e.fails(403, "access_denied", "GET", "/v1/inboxes", e.newKey("off", db.AllScopes()...), nil)
	quota := e.newKey("quota", db.AllScopes()...)
	e.ok("createInbox", "POST", "/v1/inboxes", quota, map[string]any{"username": "first"})
	e.fails(422, "inbox_limit", "POST", "/v1/inboxes", quota, map[string]any{"username": "second"})
}

func TestPendingInboxSetup(t *testing.T) {
	c := qt.New(t)
	e := newEnv(t)
	_, err := db.CreateInbox(context.Background(), e.store, db.NewInbox{AccountID: "acme", Address: "late@inboxd.test", DefaultDomain: testDomain,
		DeliveryStatus: db.DeliveryPending, Seeding: true})
	c.Assert(err, qt.IsNil)
	c.Assert(e.ok("getInbox", "GET", inboxPath("late@inboxd.test"), e.full, nil)["deliveryStatus"], qt.Equals, "pending")
	c.Assert(e.ok("finishInboxSetup", "POST", inboxPath("late@inboxd.test")+"/setup", e.full, map[string]any{})["deliveryStatus"], qt.Equals, "ready")
	e.fails(422, "invalid_argument", "POST", inboxPath("late@inboxd.test")+"/setup", e.full, map[string]any{"force": true})
}
