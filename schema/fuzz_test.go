package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
)

// The request parsers under fuzzing: Body (every operation with a body) and Query (every
// GET operation). Whatever a client sends, they must not panic, every refusal must be the
// client error that names its field, and a body they accept must carry no line break in a
// field that ends up in a mail header (nor any control character in an address or a file
// name). scripts/test.sh runs each for a bounded time; crashers stay in testdata/fuzz as
// regression cases.

func bodyOps() []string {
	var ops []string
	for _, op := range Operations() {
		if op.Method != "GET" {
			ops = append(ops, op.ID)
		}
	}
	return ops
}

func FuzzBody(f *testing.F) {
	ops := bodyOps()
	index := func(id string) uint8 {
		for i, op := range ops {
			if op == id {
				return uint8(i)
			}
		}
		f.Fatalf("no operation %s", id)
		return 0
	}
	att := `{"filename": "a.txt", "contentType": "text/plain", "content": "aGVsbG8="}`
	for _, seed := range []struct{ op, body string }{
		{"send", `{"to": ["a@example.com"], "subject": "Hi", "text": "Hello", "idempotencyKey": "k1"}`},
		{"send", `{"to": ["A <a@example.com>"], "cc": ["b@example.com"], "bcc": ["c@example.com"], "html": "<p>x</p>", "labels": ["x"], "attachments": [` + att + `], "idempotencyKey": "k2"}`},
		{"send", `{"to": ["a@example.com"], "subject": "Hi\r\nBcc: x@evil.example", "text": "x", "idempotencyKey": "k3"}`},
		{"reply", `{"text": "Thanks", "replyAll": true, "idempotencyKey": "r1"}`},
		{"reply", `{"to": ["a@example.com"], "html": "<b>x</b>", "attachments": [` + att + `], "idempotencyKey": "r2"}`},
		{"createInbox", `{"username": "agent", "displayName": "My agent", "group": "g1"}`},
		{"createInbox", `{"username": "agent", "displayName": "Bot\r\nX-Evil: 1"}`},
		{"updateInbox", `{"displayName": "New name", "group": null}`},
		{"updateMessageLabels", `{"addLabels": ["a", "b"], "removeLabels": ["unread"]}`},
		{"updateThreadLabels", `{"addLabels": ["trash"]}`},
		{"deleteInbox", ``},
		{"finishInboxSetup", `{}`},
		{"send", `{"to": ["a@example.com"], "text": "x", "idempotencyKey": "k4", "to": ["b@example.com"]}`},
		{"send", `{"to": ["a@example.com"], "text": "x", "idempotencyKey": "k5", "attachments": [{"filename": "a", "file\u006eame": "b", "contentType": "text/plain", "content": ""}]}`},
		{"updateMessageLabels", `{"addLabels": ["a\u001b[31m", "b\r\n", "c\u0085"]}`},
	} {
		f.Add(index(seed.op), []byte(seed.body))
	}
	v, err := testValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		id := ops[int(op)%len(ops)]
		err := v.Body(id, body)
		if err != nil {
			checkClientError(t, err)
			return
		}
		var doc map[string]any
		if len(strings.TrimSpace(string(body))) == 0 {
			return
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s accepted a body that is not a JSON object: %v", id, err)
		}
		for _, name := range []string{"subject", "displayName"} { // a tab is fine in a header
			if s, ok := doc[name].(string); ok && strings.ContainsAny(s, "\r\n") {
				t.Errorf("%s accepted %s %q", id, name, s)
			}
		}
		for _, name := range []string{"to", "cc", "bcc"} {
			list, _ := doc[name].([]any)
			for _, a := range list {
				if s, _ := a.(string); hasControl(s) {
					t.Errorf("%s accepted %s address %q", id, name, s)
				}
			}
		}
		if key, dup := repeatedKey(body); dup {
			t.Errorf("%s accepted a body that repeats %q", id, key)
		}
		for _, name := range []string{"labels", "addLabels", "removeLabels"} {
			list, _ := doc[name].([]any)
			for _, l := range list {
				if s, _ := l.(string); hasControl(s) {
					t.Errorf("%s accepted label %q", id, s)
				}
			}
		}
		atts, _ := doc["attachments"].([]any)
		for _, a := range atts {
			m, _ := a.(map[string]any)
			for _, name := range []string{"filename", "contentType"} {
				if s, _ := m[name].(string); hasControl(s) {
					t.Errorf("%s accepted attachment %s %q", id, name, s)
				}
			}
		}
	})
}

func FuzzQuery(f *testing.F) {
	var ops []string
	for _, op := range Operations() {
		if op.Method == "GET" {
			ops = append(ops, op.ID)
		}
	}
	for i, q := range []string{
		"limit=10&pageToken=abc",
		"labels=unread&labels=important&category=support&needsReply=yes&urgency=high",
		"query=from%3Aalice+%22quarterly+report%22+-newsletter&limit=100",
		"includeBodies=true",
		"group=sales&limit=0",
		"limit=1&limit=2",
		"unknown=1",
	} {
		f.Add(uint8(i), q)
	}
	v, err := testValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, op uint8, raw string) {
		values, err := url.ParseQuery(raw)
		if err != nil {
			return // the server refuses it before validation (400)
		}
		if _, err := v.Query(ops[int(op)%len(ops)], values); err != nil {
			checkClientError(t, err)
		}
	})
}

// checkClientError asserts err is the client error the server maps to 400 or 422, with a
// message that names its field first.
func checkClientError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("not a client error: %v", err)
	}
	if e.Message == "" || (e.Field != "" && !strings.HasPrefix(e.Message, e.Field+": ")) {
		t.Fatalf("message %q does not name field %q", e.Message, e.Field)
	}
}

// repeatedKey finds a key repeated within one object of a valid JSON document by
// decoding it token by token: a second implementation to hold DuplicateKey to.
func repeatedKey(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var walk func() (string, bool)
	walk = func() (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				key, _ := k.(string)
				if seen[key] {
					return key, true
				}
				seen[key] = true
				if key, dup := walk(); dup {
					return key, true
				}
			}
			dec.Token() // }
		case json.Delim('['):
			for dec.More() {
				if key, dup := walk(); dup {
					return key, true
				}
			}
			dec.Token() // ]
		}
		return "", false
	}
	return walk()
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) })
}
