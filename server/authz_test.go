package server_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/schema"
)

// TestAuthorizationMatrix calls every operation with every kind of key and checks the
// exact documented status: 401 without a valid key, 403 for a missing scope or a mailbox
// key outside its allow-list or its inbox, 404 for another account's inbox, 200 otherwise.
func TestAuthorizationMatrix(t *testing.T) {
	type keyKind struct {
		name string
		key  func(e *env) string
		want func(op schema.Operation) int
	}
	inboxScoped := func(op schema.Operation) bool { return len(op.PathParams) > 0 }
	mailboxAllowed := map[string]bool{
		"getInbox": true, "listInboxes": true, "listMessages": true, "searchMessages": true, "getMessage": true,
		"getAttachment": true, "send": true, "reply": true, "updateMessageLabels": true, "listThreads": true,
		"getThread": true, "updateThreadLabels": true,
	}
	kinds := []keyKind{
		{"none", func(e *env) string { return "" }, func(schema.Operation) int { return 401 }},
		{"unknown", func(e *env) string { return db.GenerateAccountToken() }, func(schema.Operation) int { return 401 }},
		{"expired", func(e *env) string {
			token, past := db.GenerateAccountToken(), time.Now().Add(-time.Minute)
			qt.Assert(e.t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: "acme", Token: token, Scopes: db.AllScopes(), ExpiresAt: &past}), qt.IsNil)
			return token
		}, func(schema.Operation) int { return 401 }},
		{"full", func(e *env) string { return e.full }, func(schema.Operation) int { return 200 }},
		{"other account", func(e *env) string { return e.other }, func(op schema.Operation) int {
			if inboxScoped(op) {
				return 404
			}
			return 200
		}},
		{"mailbox key of the inbox", func(e *env) string { return e.mailboxKey("acme", "target@inboxd.test") }, func(op schema.Operation) int {
			if mailboxAllowed[op.ID] {
				return 200
			}
			return 403
		}},
		{"mailbox key of another inbox", func(e *env) string { return e.mailboxKey("acme", "neighbour@inboxd.test") }, func(op schema.Operation) int {
			if mailboxAllowed[op.ID] && !inboxScoped(op) {
				return 200
			}
			return 403
		}},
	}
	for _, scope := range db.AllScopes() {
		kinds = append(kinds, keyKind{"scope " + scope, func(e *env) string { return e.newKey("acme", scope) }, func(op schema.Operation) int {
			if op.Scope == scope {
				return 200
			}
			return 403
		}})
	}
	// The spec's operations; the extensions have authorization tests of their own.
	ops := schema.Operations()[:schema.SpecOperations]
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			e := newEnv(t)
			target := e.createInbox("target")
			e.createInbox("neighbour")
			e.deliver(target, db.NewMessage{MessageID: "<m@x.test>", From: "a@x.test", To: []string{target}, Subject: "hello", Text: "hello there",
				Attachments: []db.NewAttachment{{Filename: "a.txt", ContentType: "text/plain", Content: []byte("a")}}})
			m := e.ok("getMessage", "GET", msgPath(target, "<m@x.test>"), e.full, nil)
			attID := m["attachments"].([]any)[0].(map[string]any)["attachmentId"].(string)
			threadID := m["threadId"].(string)
			key := kind.key(e)
			// deleteInbox runs last so every other operation still finds the inbox.
			ordered := append([]schema.Operation{}, ops...)
			for i, op := range ordered {
				if op.ID == "deleteInbox" {
					ordered = append(append(ordered[:i:i], ordered[i+1:]...), op)
					break
				}
			}
			for i, op := range ordered {
				method, path, body := matrixRequest(op.ID, target, attID, threadID, i)
				r := e.do(method, path, key, body)
				qt.Check(t, r.status, qt.Equals, kind.want(op), qt.Commentf("%s %s: %s", op.ID, kind.name, r.body))
			}
		})
	}
}

// matrixRequest is a request for opID that succeeds when the key allows it.
func matrixRequest(opID, inbox, attID, threadID string, n int) (string, string, any) {
	p := inboxPath(inbox)
	msg := p + "/messages/" + url.PathEscape("<m@x.test>")
	switch opID {
	case "listInboxes":
		return "GET", "/v1/inboxes", nil
	case "createInbox":
		return "POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("new%d", n)}
	case "getInbox":
		return "GET", p, nil
	case "updateInbox":
		return "PATCH", p, map[string]any{"group": "g"}
	case "deleteInbox":
		return "DELETE", p, nil
	case "finishInboxSetup":
		return "POST", p + "/setup", nil
	case "listMessages":
		return "GET", p + "/messages", nil
	case "searchMessages":
		return "GET", p + "/messages/search?query=hello", nil
	case "getMessage":
		return "GET", msg, nil
	case "send":
		return "POST", p + "/messages/send", map[string]any{"to": []string{"x@example.test"}, "text": "t", "idempotencyKey": fmt.Sprint("s", n)}
	case "reply":
		return "POST", msg + "/reply", map[string]any{"text": "t", "idempotencyKey": fmt.Sprint("r", n)}
	case "updateMessageLabels":
		return "PATCH", msg + "/labels", map[string]any{"addLabels": []string{"seen"}}
	case "getAttachment":
		return "GET", msg + "/attachments/" + attID, nil
	case "listThreads":
		return "GET", p + "/threads", nil
	case "getThread":
		return "GET", p + "/threads/" + threadID, nil
	case "updateThreadLabels":
		return "PATCH", p + "/threads/" + threadID + "/labels", map[string]any{"addLabels": []string{"seen"}}
	case "getUsage":
		return "GET", "/v1/usage", nil
	}
	panic("no request for " + opID)
}
