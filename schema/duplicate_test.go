package schema

import (
	"encoding/json"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// A JSON object that repeats a key is ambiguous (RFC 8259 section 4: names SHOULD be
// unique); decoders keep the last one silently, so two "to" fields would send to the
// second. Every body refuses it, naming the key by its path.
func TestBodyDuplicateKeys(t *testing.T) {
	att := `{"filename":"a.txt","contentType":"text/plain","content":"aGk="}`
	send := func(rest string) string {
		return `{"to":["a@example.com"],"text":"x","idempotencyKey":"k"` + rest + `}`
	}
	runBodyCases(t, []bodyCase{
		{"top level", "send", send(`,"to":["b@example.com"]`), bad("to")},
		{"same value twice", "createInbox", `{"username":"a","username":"a"}`, bad("username")},
		{"escaped spelling", "createInbox", `{"username":"a","user\u006eame":"b"}`, bad("username")},
		{"both escaped", "createInbox", `{"\u0075sername":"a","user\u006eame":"b"}`, bad("username")},
		{"after whitespace", "updateInbox", "{ \"group\" : null ,\n\t\"group\" : \"sales\" }", bad("group")},
		{"in an attachment", "send", send(`,"attachments":[{"filename":"a","contentType":"text/plain","content":"","filename":"b.txt"}]`), bad("attachments[0].filename")},
		{"in a later attachment", "send", send(`,"attachments":[` + att + `,{"content":"","filename":"a","contentType":"text/plain","content":"aGk="}]`), bad("attachments[1].content")},
		{"label lists", "updateThreadLabels", `{"addLabels":["a"],"removeLabels":[],"addLabels":["b"]}`, bad("addLabels")},
		{"unknown key twice", "createInbox", `{"username":"a","x":1,"x":2}`, bad("x")},
		{"inside an unknown value", "updateInbox", `{"meta":[{"a":1},{"b":{"c":1,"c":2}}]}`, bad("meta[1].b.c")},
		{"key with a quote", "createInbox", `{"username":"a","q\"k":1,"q\"k":2}`, bad(`q"k`)},
		{"twice of many", "createInbox", `{"username":"u","k01":1,"k02":1,"k03":1,"k04":1,"k05":1,"k06":1,"k07":1,"k08":1,"k09":1,"k10":1,"k11":1,"k12":1,"k13":1,"k14":1,"k15":1,"k16":1,"k17":1,"k18":1,"k19":1,"k20":1,"k07":2}`, bad("k07")},
		// Not duplicates.
		{"same key in sibling objects", "send", send(`,"attachments":[` + att + `,` + att + `]`), ok},
		{"key equal to a value", "createInbox", `{"username":"username"}`, ok},
		{"keys that differ in case", "createInbox", `{"username":"a","Username":"b"}`, bad("Username")},          // unknown, not repeated
		{"escaped backslash is not an escape", "createInbox", `{"username":"a","k\\u0041":1,"kA":2}`, bad("kA")}, // unknown, not repeated
		{"empty object", "updateMessageLabels", `{}`, ok},
	})
	v := validator(t)
	err := v.Body("send", []byte(send(`,"to":["b@example.com"]`)))
	qt.Check(t, err, qt.ErrorMatches, `to: appears more than once in its object; give each key once`)
	// Malformed JSON is still the 400 it was, and a repeated path id the 400 it was.
	assertOutcome(qt.New(t), v.Body("createInbox", []byte(`{"username":"a","username":`)), syntax(""))
	assertOutcome(qt.New(t), v.Body("updateInbox", []byte(`{"inboxId":"a@b.co","inboxId":"a@b.co"}`)), syntax("inboxId"))
}

// DuplicateKey is the same rule for JSON read elsewhere (MCP tool arguments): it reports
// the first repeated key of any object, by its path, or nil.
func TestDuplicateKey(t *testing.T) {
	for raw, want := range map[string]string{
		`{}`: "", `[]`: "", `"x"`: "", `1`: "", `null`: "",
		`{"a":{"a":{"a":1}}}`:                            "",
		`[{"a":1},{"a":1}]`:                              "",
		`{"a":1,"b":[1,{"c":2,"c":3}]}`:                  "b[1].c",
		`[[],[{"x":"}","x":1}]]`:                         "[1][0].x",
		`{"s":"{\"a\":1,\"a\":2}"}`:                      "",
		`{"a\\":1,"a\\":2}`:                              `a\`,
		`{"é":1,"\u00e9":2}`:                             "é",
		`{"\ud83d\ude00":1,"😀":2}`:                       "😀",
		`{"a":1,"b":2,"a":3,"b":4}`:                      "a",
		`{"o":{"x":true,"y":false,"z":null,"x":-1.5e3}}`: "o.x",
		"{\"\xff\":1,\"\\ufffd\":2}":                     "\ufffd", // as the decoder reads bytes that are not UTF-8
	} {
		err := DuplicateKey([]byte(raw), 0)
		if want == "" {
			qt.Check(t, err, qt.IsNil, qt.Commentf("%s", raw))
			continue
		}
		var e *Error
		if qt.Check(t, err, qt.ErrorAs, &e, qt.Commentf("%s", raw)) {
			qt.Check(t, e.Field, qt.Equals, want, qt.Commentf("%s", raw))
			qt.Check(t, e.Syntax, qt.IsFalse)
		}
	}
}

// A body a client could send: many large strings and many small objects.
func TestDuplicateKeyAgreesWithADecoder(t *testing.T) {
	for _, raw := range []string{
		obj(sendBase, map[string]any{"attachments": repeatAny(attachment(nil), 10), "labels": repeat("x", 50)}),
		`{"k":"` + strings.Repeat(`\\\"`, 1000) + `","k2":"` + strings.Repeat("a", 1<<16) + `"}`,
	} {
		var m map[string]any
		qt.Assert(t, json.Unmarshal([]byte(raw), &m), qt.IsNil)
		qt.Check(t, DuplicateKey([]byte(raw), 0), qt.IsNil)
	}
}

// DuplicateKey agrees with a decoder on every valid JSON document: it finds a repeated key
// exactly when there is one, and names it.
func FuzzDuplicateKey(f *testing.F) {
	for _, seed := range []string{`{"a":1,"a":2}`, `[{"a":{"b":[1,"x\"",{"c":null,"c":true}]}}]`, `{"\u0061":1,"a":2}`, `"s"`, `{"k":"\\","k2":"\\\""}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return
		}
		err := DuplicateKey(raw, 0)
		key, dup := repeatedKey(raw)
		if dup != (err != nil) {
			t.Fatalf("DuplicateKey says %v, a decoder finds %q (%v)", err, key, dup)
		}
		if dup && !strings.HasSuffix(err.(*Error).Field, key) {
			t.Fatalf("DuplicateKey names %q, a decoder finds %q", err.(*Error).Field, key)
		}
	})
}
