package schema

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// obj builds a JSON body from a base and changes; a nil value deletes the key.
func obj(base map[string]any, changes map[string]any) string {
	m := map[string]any{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// null is a JSON null for obj, whose nil means "delete".
var null = json.RawMessage("null")

func emails(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("user%d@example.com", i)
	}
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func attachment(changes map[string]any) map[string]any {
	a := map[string]any{"filename": "invoice.pdf", "contentType": "application/pdf", "content": "JVBERi0xLjQK"}
	for k, v := range changes {
		if v == nil {
			delete(a, k)
		} else {
			a[k] = v
		}
	}
	return a
}

// b64 returns canonical base64 of n bytes.
func b64(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }

var (
	sendBase  = map[string]any{"to": []string{"bob@example.com"}, "text": "Hello", "idempotencyKey": "k-1"}
	replyBase = map[string]any{"idempotencyKey": "k-1"}
)

type bodyCase struct {
	name string
	op   string
	body string
	want outcome
}

func runBodyCases(t *testing.T, cases []bodyCase) {
	v := validator(t)
	for _, tt := range cases {
		t.Run(tt.op+"/"+tt.name, func(t *testing.T) {
			assertOutcome(qt.New(t), v.Body(tt.op, []byte(tt.body)), tt.want)
		})
	}
}

func TestBodySyntax(t *testing.T) {
	runBodyCases(t, []bodyCase{
		{"empty body is {}", "finishInboxSetup", "", ok},
		{"blank body is {}", "updateMessageLabels", " \n\t", ok},
		{"empty body still needs required fields", "createInbox", "", bad("username")},
		{"not JSON", "createInbox", "username=alice", syntax("")},
		{"truncated", "createInbox", `{"username":"alice"`, syntax("")},
		{"trailing data", "createInbox", `{"username":"alice"} {}`, syntax("")},
		{"trailing brace", "createInbox", `{"username":"alice"}}`, syntax("")},
		{"array", "createInbox", `[{"username":"alice"}]`, syntax("")},
		{"string", "send", `"hello"`, syntax("")},
		{"null", "updateInbox", `null`, syntax("")},
		{"not UTF-8", "createInbox", "{\"username\":\"al\xffce\"}", syntax("")},
		{"path param repeated", "updateInbox", `{"inboxId":"alice@example.com","group":null}`, syntax("inboxId")},
		{"path param repeated in reply", "reply", `{"messageId":"<a@b>","idempotencyKey":"k"}`, syntax("messageId")},
		{"path param repeated in labels", "updateThreadLabels", `{"threadId":"0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90"}`, syntax("threadId")},
		{"inboxId in createInbox is just unknown", "createInbox", `{"username":"a","inboxId":"x"}`, bad("inboxId")},
	})
}

func TestBodyCreateInbox(t *testing.T) {
	base := map[string]any{"username": "alice"}
	runBodyCases(t, []bodyCase{
		{"minimal", "createInbox", obj(base, nil), ok},
		{"everything", "createInbox", obj(base, map[string]any{"domain": "mail.example.com", "displayName": "Alice Doe", "group": "support"}), ok},
		{"username mixed case and symbols", "createInbox", obj(base, map[string]any{"username": "Alice.B_c-d"}), ok},
		{"unknown field", "createInbox", obj(base, map[string]any{"address": "a@b.co"}), bad("address")},
		{"username missing", "createInbox", obj(base, map[string]any{"username": nil}), bad("username")},
		{"username empty", "createInbox", obj(base, map[string]any{"username": ""}), bad("username")},
		{"username not a string", "createInbox", obj(base, map[string]any{"username": 7}), bad("username")},
		{"username leading dot", "createInbox", obj(base, map[string]any{"username": ".alice"}), bad("username")},
		{"username with +", "createInbox", obj(base, map[string]any{"username": "a+b"}), bad("username")},
		{"username 64", "createInbox", obj(base, map[string]any{"username": strings.Repeat("a", 64)}), ok},
		{"username 65", "createInbox", obj(base, map[string]any{"username": strings.Repeat("a", 65)}), bad("username")},
		{"username consecutive dots", "createInbox", obj(base, map[string]any{"username": "a..b"}), bad("username")},
		{"username trailing dot", "createInbox", obj(base, map[string]any{"username": "alice."}), bad("username")},
		{"domain uppercase", "createInbox", obj(base, map[string]any{"domain": "Example.com"}), bad("domain")},
		{"domain undotted", "createInbox", obj(base, map[string]any{"domain": "localhost"}), bad("domain")},
		{"domain label hyphen end", "createInbox", obj(base, map[string]any{"domain": "a-.example.com"}), bad("domain")},
		{"domain numeric TLD", "createInbox", obj(base, map[string]any{"domain": "example.c0m"}), bad("domain")},
		{"domain 254", "createInbox", obj(base, map[string]any{"domain": strings.Repeat("a.", 126) + "co"}), bad("domain")},
		{"address over 254", "createInbox", obj(base, map[string]any{"username": strings.Repeat("u", 64), "domain": strings.Repeat("a.", 94) + "com"}), bad("domain")},
		{"address of 254", "createInbox", obj(base, map[string]any{"username": strings.Repeat("u", 64), "domain": strings.Repeat("a.", 93) + "com"}), ok},
		{"displayName 200", "createInbox", obj(base, map[string]any{"displayName": strings.Repeat("é", 200)}), ok},
		{"displayName 201", "createInbox", obj(base, map[string]any{"displayName": strings.Repeat("d", 201)}), bad("displayName")},
		{"displayName with LF", "createInbox", obj(base, map[string]any{"displayName": "Alice\nBcc: x@y.com"}), bad("displayName")},
		{"displayName with CR", "createInbox", obj(base, map[string]any{"displayName": "Alice\r"}), bad("displayName")},
		{"displayName with NUL", "createInbox", obj(base, map[string]any{"displayName": "Al\x00ice"}), bad("displayName")},
		{"group uppercase", "createInbox", obj(base, map[string]any{"group": "Support"}), bad("group")},
		{"group empty", "createInbox", obj(base, map[string]any{"group": ""}), bad("group")},
		{"group 65", "createInbox", obj(base, map[string]any{"group": strings.Repeat("g", 65)}), bad("group")},
		{"group null", "createInbox", obj(base, map[string]any{"group": null}), bad("group")},
	})
}

func TestBodyInboxUpdates(t *testing.T) {
	runBodyCases(t, []bodyCase{
		{"group", "updateInbox", `{"group":"team-a_1"}`, ok},
		{"group null", "updateInbox", `{"group":null}`, ok},
		{"group required", "updateInbox", `{}`, bad("group")},
		{"group required, empty body", "updateInbox", ``, bad("group")},
		{"group pattern", "updateInbox", `{"group":"Team A"}`, bad("group")},
		{"group type", "updateInbox", `{"group":1}`, bad("group")},
		{"group empty string", "updateInbox", `{"group":""}`, bad("group")},
		{"other field", "updateInbox", `{"group":null,"displayName":"x"}`, bad("displayName")},
		{"setup empty object", "finishInboxSetup", `{}`, ok},
		{"setup with a field", "finishInboxSetup", `{"force":true}`, bad("force")},
		{"delete no body", "deleteInbox", ``, ok},
		{"delete empty object", "deleteInbox", `{}`, ok},
		{"delete with a field", "deleteInbox", `{"confirm":true}`, bad("confirm")},
	})
}

func TestBodyLabels(t *testing.T) {
	var cases []bodyCase
	for _, op := range []string{"updateMessageLabels", "updateThreadLabels"} {
		cases = append(cases, []bodyCase{
			{"empty", op, `{}`, ok},
			{"both", op, `{"addLabels":["important","trash"],"removeLabels":["unread"]}`, ok},
			{"empty lists", op, `{"addLabels":[],"removeLabels":[]}`, ok},
			{"50", op, obj(nil, map[string]any{"addLabels": repeat("x", 50)}), ok},
			{"51", op, obj(nil, map[string]any{"addLabels": repeat("x", 51)}), bad("addLabels")},
			{"51 removed", op, obj(nil, map[string]any{"removeLabels": repeat("x", 51)}), bad("removeLabels")},
			{"empty label", op, `{"addLabels":["ok",""]}`, bad("addLabels[1]")},
			{"64 chars", op, obj(nil, map[string]any{"removeLabels": []string{strings.Repeat("l", 64)}}), ok},
			{"65 chars", op, obj(nil, map[string]any{"removeLabels": []string{strings.Repeat("l", 65)}}), bad("removeLabels[0]")},
			{"not a list", op, `{"addLabels":"x"}`, bad("addLabels")},
			{"not strings", op, `{"addLabels":[1]}`, bad("addLabels[0]")},
			{"unknown field", op, `{"labels":["x"]}`, bad("labels")},
			{"NUL", op, `{"addLabels":["a","b\u0000"]}`, bad("addLabels[1]")},
			// quarantined is the server's 403 quarantine_review_required, not a 422.
			{"quarantined passes the schema", op, `{"removeLabels":["quarantined"]}`, ok},
		}...)
	}
	runBodyCases(t, cases)
}

func TestBodySend(t *testing.T) {
	runBodyCases(t, []bodyCase{
		{"minimal", "send", obj(sendBase, nil), ok},
		{"everything", "send", obj(sendBase, map[string]any{
			"cc": []string{"Carol@Example.COM"}, "bcc": []string{"d.e+tag@mail.example.org"}, "subject": "Hi",
			"html": "<p>Hello</p>", "labels": []string{"outreach"}, "attachments": []any{attachment(nil)},
		}), ok},
		{"html only", "send", obj(sendBase, map[string]any{"text": nil, "html": "<p>Hello</p>"}), ok},
		{"unknown field", "send", obj(sendBase, map[string]any{"replyAll": true}), bad("replyAll")},
		{"from is not settable", "send", obj(sendBase, map[string]any{"from": "x@example.com"}), bad("from")},

		// Recipients.
		{"to missing", "send", obj(sendBase, map[string]any{"to": nil}), bad("to")},
		{"to empty", "send", obj(sendBase, map[string]any{"to": []string{}}), bad("to")},
		{"to a string", "send", obj(sendBase, map[string]any{"to": "bob@example.com"}), bad("to")},
		{"to not an address", "send", obj(sendBase, map[string]any{"to": []string{"bob@example.com", "bob"}}), bad("to[1]")},
		{"to leading dot", "send", obj(sendBase, map[string]any{"to": []string{".bob@example.com"}}), bad("to[0]")},
		{"to consecutive dots", "send", obj(sendBase, map[string]any{"to": []string{"b..ob@example.com"}}), bad("to[0]")},
		{"to no TLD", "send", obj(sendBase, map[string]any{"to": []string{"bob@example"}}), bad("to[0]")},
		{"to display name", "send", obj(sendBase, map[string]any{"to": []string{"Bob <bob@example.com>"}}), bad("to[0]")},
		{"to 254 chars", "send", obj(sendBase, map[string]any{"to": []string{strings.Repeat("b", 64) + "@" + strings.Repeat("a.", 93) + "com"}}), ok},
		{"to 255 chars", "send", obj(sendBase, map[string]any{"to": []string{strings.Repeat("b", 65) + "@" + strings.Repeat("a.", 93) + "com"}}), bad("to[0]")},
		{"to 50", "send", obj(sendBase, map[string]any{"to": emails(50)}), ok},
		{"to 51", "send", obj(sendBase, map[string]any{"to": emails(51)}), bad("to")},
		{"cc 51", "send", obj(sendBase, map[string]any{"cc": emails(51)}), bad("cc")},
		{"cc bad address", "send", obj(sendBase, map[string]any{"cc": []string{"a@b.co", "x@", "c@d.co"}}), bad("cc[1]")},
		{"bcc 51", "send", obj(sendBase, map[string]any{"bcc": emails(51)}), bad("bcc")},
		{"to+cc+bcc 50", "send", obj(sendBase, map[string]any{"to": emails(20), "cc": emails(20), "bcc": emails(10)}), ok},
		{"to+cc+bcc 51", "send", obj(sendBase, map[string]any{"to": emails(20), "cc": emails(20), "bcc": emails(11)}), bad("to")},

		// Subject.
		{"subject 998", "send", obj(sendBase, map[string]any{"subject": strings.Repeat("s", 998)}), ok},
		{"subject 999", "send", obj(sendBase, map[string]any{"subject": strings.Repeat("s", 999)}), bad("subject")},
		{"subject CR", "send", obj(sendBase, map[string]any{"subject": "Hi\rBcc: x@y.com"}), bad("subject")},
		{"subject LF", "send", obj(sendBase, map[string]any{"subject": "Hi\n"}), bad("subject")},
		{"subject NUL", "send", obj(sendBase, map[string]any{"subject": "Hi\x00"}), bad("subject")},
		{"subject empty", "send", obj(sendBase, map[string]any{"subject": ""}), ok},

		// Body.
		{"no text or html", "send", obj(sendBase, map[string]any{"text": nil}), bad("text")},
		{"blank text", "send", obj(sendBase, map[string]any{"text": " \n\t "}), bad("text")},
		{"blank text and html", "send", obj(sendBase, map[string]any{"text": "", "html": "  "}), bad("text")},
		{"text not a string", "send", obj(sendBase, map[string]any{"text": 5}), bad("text")},
		{"text 2,000,001 chars", "send", obj(sendBase, map[string]any{"text": strings.Repeat("t", 2_000_001)}), bad("text")},
		{"html 2,000,001 chars", "send", obj(sendBase, map[string]any{"html": strings.Repeat("h", 2_000_001)}), bad("html")},
		{"text 512 KiB", "send", obj(sendBase, map[string]any{"text": strings.Repeat("t", 512<<10)}), ok},
		{"text 512 KiB + 1", "send", obj(sendBase, map[string]any{"text": strings.Repeat("t", 512<<10+1)}), bad("text")},
		{"UTF-8 bytes count, not characters", "send", obj(sendBase, map[string]any{"text": strings.Repeat("é", 256<<10+1)}), bad("text")},
		{"UTF-8 bytes at the limit", "send", obj(sendBase, map[string]any{"text": strings.Repeat("é", 256<<10)}), ok},
		{"text+html over 512 KiB", "send", obj(sendBase, map[string]any{"text": strings.Repeat("t", 300_000), "html": strings.Repeat("h", 300_000)}), bad("text")},
		{"html alone over 512 KiB", "send", obj(sendBase, map[string]any{"text": nil, "html": strings.Repeat("h", 600_000)}), bad("html")},
		{"text NUL", "send", obj(sendBase, map[string]any{"text": "a\x00b"}), bad("text")},
		{"text lone high surrogate", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"a\ud800b"}`, bad("text")},
		{"text lone high surrogate at end", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"a\uD800"}`, bad("text")},
		{"html lone low surrogate", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"x","html":"\udc00"}`, bad("html")},
		{"high then high", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"\ud83d\ud83d\ude00"}`, bad("text")},
		{"surrogate pair", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"smile \ud83d\ude00"}`, ok},
		{"escaped backslash is not an escape", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"C:\\ud800"}`, ok},
		{"surrogate in subject", "send", `{"to":["bob@example.com"],"idempotencyKey":"k","text":"x","subject":"\udfff"}`, bad("subject")},

		// Labels.
		{"labels 50", "send", obj(sendBase, map[string]any{"labels": repeat("l", 50)}), ok},
		{"labels 51", "send", obj(sendBase, map[string]any{"labels": repeat("l", 51)}), bad("labels")},
		{"label empty", "send", obj(sendBase, map[string]any{"labels": []string{""}}), bad("labels[0]")},
		{"label 65", "send", obj(sendBase, map[string]any{"labels": []string{"a", strings.Repeat("l", 65)}}), bad("labels[1]")},
		{"label quarantined", "send", obj(sendBase, map[string]any{"labels": []string{"x", "quarantined"}}), bad("labels")},

		// Attachments.
		{"10 attachments", "send", obj(sendBase, map[string]any{"attachments": repeatAny(attachment(nil), 10)}), ok},
		{"11 attachments", "send", obj(sendBase, map[string]any{"attachments": repeatAny(attachment(nil), 11)}), bad("attachments")},
		{"attachments not a list", "send", obj(sendBase, map[string]any{"attachments": attachment(nil)}), bad("attachments")},
		{"unknown attachment field", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"size": 3})}}), bad("attachments[0].size")},
		{"filename missing", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": nil})}}), bad("attachments[0].filename")},
		{"filename empty", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": ""})}}), bad("attachments[0].filename")},
		{"filename blank", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": "   "})}}), bad("attachments[0].filename")},
		{"filename slash", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(nil), attachment(map[string]any{"filename": "../etc/passwd"})}}), bad("attachments[1].filename")},
		{"filename backslash", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": `a\b.txt`})}}), bad("attachments[0].filename")},
		{"filename control", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": "a\tb.txt"})}}), bad("attachments[0].filename")},
		{"filename C1 control", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": "a\u0085b.txt"})}}), bad("attachments[0].filename")},
		{"filename with spaces and accents", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": " Résumé 2026.pdf"})}}), ok},
		{"filename 200", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": strings.Repeat("f", 200)})}}), ok},
		{"filename 201", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": strings.Repeat("f", 201)})}}), bad("attachments[0].filename")},
		{"contentType missing", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"contentType": nil})}}), bad("attachments[0].contentType")},
		{"contentType no subtype", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"contentType": "text"})}}), bad("attachments[0].contentType")},
		{"contentType parameters", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"contentType": "text/plain; charset=utf-8"})}}), bad("attachments[0].contentType")},
		{"contentType vendor", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"contentType": "application/vnd.ms-excel+xml"})}}), ok},
		{"contentType 101", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"contentType": "a/" + strings.Repeat("b", 99)})}}), bad("attachments[0].contentType")},
		{"content missing", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": nil})}}), bad("attachments[0].content")},
		{"content empty", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": ""})}}), ok},
		{"content not base64", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "not base64!"})}}), bad("attachments[0].content")},
		{"content base64url", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "ab-_"})}}), bad("attachments[0].content")},
		{"content with line break", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "QUJD\nREVG"})}}), bad("attachments[0].content")},
		{"content unpadded", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YQ"})}}), bad("attachments[0].content")},
		{"content length not multiple of 4", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YWJjZA="})}}), bad("attachments[0].content")},
		{"content non-zero padding bits", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YR=="})}}), bad("attachments[0].content")},
		{"content padding in the middle", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YQ==YQ=="})}}), bad("attachments[0].content")},
		{"content canonical", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YQ=="})}}), ok},
		// 2 MiB and 2 MiB + 1 byte both encode to 2,796,204 characters, the per-file maximum.
		{"content 2 MiB", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(2 << 20)})}}), ok},
		{"content 2 MiB + 1", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(2<<20 + 1)})}}), bad("attachments")},
		{"content 2,796,208 chars", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(2<<20 + 2)})}}), bad("attachments[0].content")},
		{"attachments 2 MiB decoded", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(1 << 20)}), attachment(map[string]any{"content": b64(1 << 20)})}}), ok},
		{"attachments 2 MiB + 1 decoded", "send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": b64(1 << 20)}), attachment(map[string]any{"content": b64(1<<20 + 1)})}}), bad("attachments")},

		// idempotencyKey.
		{"idempotencyKey missing", "send", obj(sendBase, map[string]any{"idempotencyKey": nil}), bad("idempotencyKey")},
		{"idempotencyKey empty", "send", obj(sendBase, map[string]any{"idempotencyKey": ""}), bad("idempotencyKey")},
		{"idempotencyKey 200", "send", obj(sendBase, map[string]any{"idempotencyKey": strings.Repeat("k", 200)}), ok},
		{"idempotencyKey 201", "send", obj(sendBase, map[string]any{"idempotencyKey": strings.Repeat("k", 201)}), bad("idempotencyKey")},
		{"idempotencyKey number", "send", obj(sendBase, map[string]any{"idempotencyKey": 42}), bad("idempotencyKey")},
	})
}

func TestBodyReply(t *testing.T) {
	runBodyCases(t, []bodyCase{
		{"key only", "reply", obj(replyBase, nil), ok},
		{"everything", "reply", obj(replyBase, map[string]any{
			"replyAll": true, "to": []string{"a@example.com"}, "cc": []string{"b@example.com"}, "bcc": []string{"c@example.com"},
			"text": "Thanks", "html": "<p>Thanks</p>", "labels": []string{"followup"}, "attachments": []any{attachment(nil)},
		}), ok},
		{"blank text is allowed", "reply", obj(replyBase, map[string]any{"text": ""}), ok},
		{"idempotencyKey missing", "reply", `{"text":"x"}`, bad("idempotencyKey")},
		{"idempotencyKey 201", "reply", obj(replyBase, map[string]any{"idempotencyKey": strings.Repeat("k", 201)}), bad("idempotencyKey")},
		{"subject is not settable", "reply", obj(replyBase, map[string]any{"subject": "Re: x"}), bad("subject")},
		{"replyAll not a boolean", "reply", obj(replyBase, map[string]any{"replyAll": "yes"}), bad("replyAll")},
		{"to empty", "reply", obj(replyBase, map[string]any{"to": []string{}}), bad("to")},
		{"to 51", "reply", obj(replyBase, map[string]any{"to": emails(51)}), bad("to")},
		{"to bad address", "reply", obj(replyBase, map[string]any{"to": []string{"nope"}}), bad("to[0]")},
		{"cc+bcc 51 without to", "reply", obj(replyBase, map[string]any{"cc": emails(30), "bcc": emails(21)}), bad("cc")},
		{"text+html over 512 KiB", "reply", obj(replyBase, map[string]any{"text": strings.Repeat("t", 262_145), "html": strings.Repeat("h", 262_144)}), bad("text")},
		{"label quarantined", "reply", obj(replyBase, map[string]any{"labels": []string{"quarantined"}}), bad("labels")},
		{"content non-canonical", "reply", obj(replyBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YR=="})}}), bad("attachments[0].content")},
		{"11 attachments", "reply", obj(replyBase, map[string]any{"attachments": repeatAny(attachment(nil), 11)}), bad("attachments")},
		{"text NUL", "reply", obj(replyBase, map[string]any{"text": "\x00"}), bad("text")},
		{"lone surrogate in filename", "reply", `{"idempotencyKey":"k","attachments":[{"filename":"a\ud800.txt","contentType":"text/plain","content":""}]}`, bad("attachments[0].filename")},
	})
}

func repeatAny(v any, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestBodyMessages(t *testing.T) {
	v := validator(t)
	// want is the start of the message; most are the whole message.
	tests := []struct {
		op, body, want string
	}{
		{"send", obj(sendBase, map[string]any{"to": []string{"a@b.co", "x", "c@d.co", "nope"}}), "to[1]: must be an email address of at most 254 characters"},
		{"send", obj(sendBase, map[string]any{"idempotencyKey": nil}), "idempotencyKey: is required"},
		{"send", obj(sendBase, map[string]any{"bogus": 1}), "bogus: is not a known field"},
		{"send", obj(sendBase, map[string]any{"to": emails(51)}), "to: must have at most 50 items"},
		{"send", obj(sendBase, map[string]any{"to": []string{}}), "to: must have at least 1 item"},
		{"send", obj(sendBase, map[string]any{"text": nil}), "text: text or html is required and may not be blank"},
		{"send", obj(sendBase, map[string]any{"to": emails(30), "cc": emails(21)}), "to: to, cc and bcc together may have at most 50 recipients, not 51"},
		{"send", obj(sendBase, map[string]any{"text": 5}), "text: must be a string of at most 2,000,000 characters"},
		{"send", obj(sendBase, map[string]any{"subject": "a\nb"}), "subject: must be a subject of at most 998 characters without line breaks"},
		{"send", obj(sendBase, map[string]any{"labels": []string{"quarantined"}}), `labels: may not contain "quarantined": quarantine is set by the scanner and released only by human review`},
		{"send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": "YR=="})}}), "attachments[0].content: must be canonical standard base64: padded with = to a multiple of 4 characters, with unused bits zero"},
		{"updateInbox", `{"group":"A"}`, "group: must be null or a group name of 1-64 characters from a-z, 0-9, _ and -, starting with a letter or digit"},
		{"updateInbox", `{"group":1}`, "group: must be null or a group name of 1-64 characters from a-z, 0-9, _ and -, starting with a letter or digit"},
		{"createInbox", `[]`, "request body must be a JSON object"},
		{"createInbox", `{`, "request body is not valid JSON: "},
		{"updateInbox", `{"inboxId":"a@b.co","group":null}`, "inboxId: belongs in the URL path and may not be repeated in the body"},
		{"createInbox", `{"username":"a..b"}`, "username: may not contain consecutive dots or end with a dot, since it becomes the local part of an email address"},
		{"createInbox", `{"username":"a","domain":"example.c0m"}`, "domain: must end in a top-level domain of 2 or more letters, such as example.com"},
		{"updateMessageLabels", `{"addLabels":[""]}`, "addLabels[0]: must be a label of 1-64 characters"},
	}
	for _, tt := range tests {
		err := v.Body(tt.op, []byte(tt.body))
		qt.Assert(t, err, qt.Not(qt.IsNil), qt.Commentf("%s %.80s", tt.op, tt.body))
		qt.Check(t, strings.HasPrefix(err.Error(), tt.want), qt.IsTrue, qt.Commentf("got %q, want it to start with %q", err, tt.want))
	}
}

func TestBodyOnlyForOperationsWithABody(t *testing.T) {
	c := qt.New(t)
	v := validator(t)
	for _, op := range []string{"listInboxes", "getMessage", "nosuchOp"} {
		err := v.Body(op, nil)
		c.Assert(err, qt.Not(qt.IsNil))
		var e *Error
		c.Check(err, qt.Not(qt.ErrorAs), &e, qt.Commentf("a programming error, not a client error: %v", err))
	}
}

func TestHasLoneSurrogate(t *testing.T) {
	tests := []struct {
		json string
		want bool
	}{
		{`"plain"`, false},
		{`"\ud83d\ude00"`, false},
		{`"\uD83D\uDE00"`, false},
		{`"\ud800"`, true},
		{`"\ud800x"`, true},
		{`"\ud800\u0041"`, true},
		{`"\udc00"`, true},
		{`"\\ud800"`, false},
		{`"\\\ud800"`, true},
		{`"\n\t\u00e9"`, false},
		{`{"a":["\ud800"]}`, true},
	}
	for _, tt := range tests {
		qt.Check(t, hasLoneSurrogate([]byte(tt.json)), qt.Equals, tt.want, qt.Commentf(tt.json))
	}
}
