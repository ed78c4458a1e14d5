package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// Every operation has a representative 200 body in testdata/responses/<operationId>.json.
func TestResponseExamplesAreValid(t *testing.T) {
	v := validator(t)
	for _, op := range Operations() {
		t.Run(op.ID, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "responses", op.ID+".json"))
			qt.Assert(t, err, qt.IsNil)
			qt.Assert(t, v.Response(op.ID, body), qt.IsNil)
		})
	}
}

// example returns a fresh decoded copy of an operation's example body.
func example(t *testing.T, opID string) any {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "responses", opID+".json"))
	qt.Assert(t, err, qt.IsNil)
	var v any
	qt.Assert(t, json.Unmarshal(body, &v), qt.IsNil)
	return v
}

// at walks a decoded document along a path of keys and indexes ("messages.0.triage").
func at(doc any, path string) map[string]any {
	cur := doc
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			continue
		}
		switch c := cur.(type) {
		case map[string]any:
			cur = c[seg]
		case []any:
			i := 0
			for _, r := range seg {
				i = i*10 + int(r-'0')
			}
			cur = c[i]
		}
	}
	return cur.(map[string]any)
}

func TestResponseCatchesMistakes(t *testing.T) {
	v := validator(t)
	tests := []struct {
		name   string
		op     string
		break_ func(doc any) any
		field  string // the field the (first) error names
	}{
		{"inbox without inboxId", "getInbox", func(d any) any { delete(at(d, ""), "inboxId"); return d }, "inboxId"},
		{"inbox with unknown field", "getInbox", func(d any) any { at(d, "")["inbox_id"] = "x"; return d }, "inbox_id"},
		{"inbox deliveryStatus", "createInbox", func(d any) any { at(d, "")["deliveryStatus"] = "active"; return d }, "deliveryStatus"},
		{"inbox group pattern", "updateInbox", func(d any) any { at(d, "")["group"] = "Team A"; return d }, "group"},
		{"inbox createdAt not a time", "finishInboxSetup", func(d any) any { at(d, "")["createdAt"] = "yesterday"; return d }, "createdAt"},
		{"inbox createdAt without zone", "getInbox", func(d any) any { at(d, "")["createdAt"] = "2026-09-20T18:07:46.000"; return d }, "createdAt"},
		{"inboxes missing", "listInboxes", func(d any) any { delete(at(d, ""), "inboxes"); return d }, "inboxes"},
		{"inbox in list without createdAt", "listInboxes", func(d any) any { delete(at(d, "inboxes.1"), "createdAt"); return d }, "inboxes[1].createdAt"},
		{"deleted not boolean", "deleteInbox", func(d any) any { at(d, "")["deleted"] = "true"; return d }, "deleted"},
		{"message without brackets", "getMessage", func(d any) any { at(d, "")["messageId"] = "CAF1234@mail.example.net"; return d }, "messageId"},
		{"message threadId not uuid", "getMessage", func(d any) any { at(d, "")["threadId"] = "t-1"; return d }, "threadId"},
		{"message labels missing", "getMessage", func(d any) any { delete(at(d, ""), "labels"); return d }, "labels"},
		{"message senderAuthentication", "getMessage", func(d any) any { at(d, "")["senderAuthentication"] = "verified"; return d }, "senderAuthentication"},
		{"attachment size negative", "getMessage", func(d any) any { at(d, "attachments.0")["size"] = -1; return d }, "attachments[0].size"},
		{"attachment id not uuid", "getMessage", func(d any) any { at(d, "attachments.0")["attachmentId"] = "a1"; return d }, "attachments[0].attachmentId"},
		{"triage category", "getMessage", func(d any) any { at(d, "triage.category")["value"] = "spam"; return d }, "triage.category.value"},
		{"triage confidence over 1", "getMessage", func(d any) any { at(d, "triage.category")["confidence"] = 1.5; return d }, "triage.category.confidence"},
		{"triage probabilities keyed by name", "getMessage", func(d any) any {
			at(d, "triage.urgency")["probabilities"] = map[string]any{"low": 0.1, "normal": 0.2, "high": 0.3, "critical": 0.4}
			return d
		}, "triage.urgency.probabilities.0"},
		{"triage urgency score over 3", "getMessage", func(d any) any { at(d, "triage.urgency")["score"] = 4; return d }, "triage.urgency.score"},
		{"triage analyzedAt with offset", "getMessage", func(d any) any { at(d, "triage")["analyzedAt"] = "2026-09-20T18:07:50+02:00"; return d }, "triage.analyzedAt"},
		{"triage complete missing model", "getMessage", func(d any) any { delete(at(d, "triage"), "model"); return d }, "triage.model"},
		{"triage version 2", "getMessage", func(d any) any { at(d, "triage")["version"] = 2; return d }, "triage.version"},
		{"triage failed without code", "listMessages", func(d any) any { delete(at(d, "messages.2.triage"), "code"); return d }, "messages[2].triage.code"},
		{"triage failed code", "listMessages", func(d any) any { at(d, "messages.2.triage")["code"] = "timeout"; return d }, "messages[2].triage.code"},
		{"triage pending with extra", "listMessages", func(d any) any { at(d, "messages.1.triage")["model"] = "x"; return d }, "messages[1].triage.model"},
		{"triage unknown status", "listMessages", func(d any) any { at(d, "messages.1.triage")["status"] = "queued"; return d }, "messages[1].triage.status"},
		{"protection status", "listMessages", func(d any) any { at(d, "messages.3.protection")["status"] = "held"; return d }, "messages[3].protection.status"},
		{"protection spf", "listMessages", func(d any) any { at(d, "messages.3.protection.authentication")["spf"] = "softfail"; return d }, "messages[3].protection.authentication.spf"},
		{"protection reason", "listMessages", func(d any) any { at(d, "messages.3.protection")["reasons"] = []any{"virus"}; return d }, "messages[3].protection.reasons[0]"},
		{"protection threshold zero", "listMessages", func(d any) any { at(d, "messages.3.protection.spam")["threshold"] = 0; return d }, "messages[3].protection.spam.threshold"},
		{"protection signing domain uppercase", "getMessage", func(d any) any {
			at(d, "protection.authentication")["signingDomains"] = []any{"Example.net"}
			return d
		}, "protection.authentication.signingDomains[0]"},
		{"protection releasedBy empty", "listMessages", func(d any) any { at(d, "messages.4.protection")["releasedBy"] = ""; return d }, "messages[4].protection.releasedBy"},
		{"delivery recipient status", "getThread", func(d any) any { at(d, "messages.1.delivery.recipients.1")["status"] = "lost"; return d }, "messages[1].delivery.recipients[1].status"},
		{"delivery recipient without delivered", "getThread", func(d any) any { delete(at(d, "messages.1.delivery.recipients.0"), "delivered"); return d }, "messages[1].delivery.recipients[0].delivered"},
		{"search nextPageToken empty", "searchMessages", func(d any) any { at(d, "")["nextPageToken"] = ""; return d }, "nextPageToken"},
		{"send without threadId", "send", func(d any) any { delete(at(d, ""), "threadId"); return d }, "threadId"},
		{"reply deduplicated not boolean", "reply", func(d any) any { at(d, "")["deduplicated"] = 1; return d }, "deduplicated"},
		{"labels op answers an object", "updateMessageLabels", func(any) any { return map[string]any{"ok": true} }, ""},
		{"thread labels op answers true", "updateThreadLabels", func(any) any { return true }, ""},
		{"attachment without expiresAt", "getAttachment", func(d any) any { delete(at(d, ""), "expiresAt"); return d }, "expiresAt"},
		{"attachment relative url", "getAttachment", func(d any) any { at(d, "")["downloadUrl"] = "/attachments/x"; return d }, "downloadUrl"},
		{"threads list with messages", "listThreads", func(d any) any { at(d, "threads.0")["messages"] = []any{}; return d }, "threads[0]"},
		{"thread without senders", "listThreads", func(d any) any { delete(at(d, "threads.1"), "senders"); return d }, "threads[1].senders"},
		{"thread messageCount negative", "listThreads", func(d any) any { at(d, "threads.0")["messageCount"] = -1; return d }, "threads[0].messageCount"},
		{"getThread without messages", "getThread", func(d any) any { delete(at(d, ""), "messages"); return d }, "messages"},
		{"getThread message without from", "getThread", func(d any) any { delete(at(d, "messages.0"), "from"); return d }, "messages[0].from"},
		{"usage billing", "getUsage", func(d any) any { at(d, "")["billing"] = "free"; return d }, "billing"},
		{"usage plans missing", "getUsage", func(d any) any { delete(at(d, ""), "plans"); return d }, "plans"},
		{"usage plan id", "getUsage", func(d any) any { at(d, "plans.0")["planId"] = "enterprise"; return d }, "plans[0].planId"},
		{"usage included seats", "getUsage", func(d any) any { delete(at(d, "plans.2.included"), "seats"); return d }, "plans[2].included.seats"},
		{"usage feature unlimited", "getUsage", func(d any) any { at(d, "features.0")["unlimited"] = "no"; return d }, "features[0].unlimited"},
		{"usage inboxes limit", "getUsage", func(d any) any { at(d, "inboxes")["limit"] = "none"; return d }, "inboxes.limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := qt.New(t)
			body, err := json.Marshal(tt.break_(example(t, tt.op)))
			c.Assert(err, qt.IsNil)
			err = v.Response(tt.op, body)
			c.Assert(err, qt.Not(qt.IsNil))
			var e *Error
			c.Assert(err, qt.ErrorAs, &e)
			c.Check(e.Field, qt.Equals, tt.field, qt.Commentf("%s", e.Message))
		})
	}
}

func TestResponseVariants(t *testing.T) {
	v := validator(t)
	valid := []struct{ op, body string }{
		{"updateMessageLabels", `null`},
		{"deleteInbox", `{"deleted":false}`},
		{"listInboxes", `{"inboxes":[]}`},
		{"listThreads", `{"threads":[]}`},
		{"getUsage", `{"billing":"disabled","plan":null,"inboxes":{"count":0,"limit":10},"features":[],"plans":[]}`},
		{"send", `{"messageId":"<a@b>","threadId":"00000000-0000-0000-0000-000000000000","deduplicated":false}`},
	}
	for _, tt := range valid {
		qt.Check(t, v.Response(tt.op, []byte(tt.body)), qt.IsNil, qt.Commentf("%s %s", tt.op, tt.body))
	}
	err := v.Response("getInbox", []byte(`{"inboxId":`))
	var e *Error
	qt.Assert(t, err, qt.ErrorAs, &e)
	qt.Check(t, e.Syntax, qt.IsTrue)
	err = v.Response("listMessages", []byte(`{"messages":[{"messageId":"<a@b>","threadId":"00000000-0000-0000-0000-000000000000","inboxId":"a@b.co","from":"x","to":[],"subject":"","preview":"","timestamp":"2026-01-01T00:00:00.000Z","labels":[],"attachments":[],"triage":{"status":"queued"}}]}`))
	qt.Check(t, err, qt.ErrorMatches, `messages\[0\]\.triage\.status: must be one of pending, failed, complete`)
	// All problems are listed, so a failing test shows them at once.
	err = v.Response("send", []byte(`{"extra":1}`))
	qt.Check(t, err, qt.ErrorMatches, `extra: is not a known field; messageId: is required; threadId: is required`)
}
