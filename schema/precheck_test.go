package schema

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// canonicalBase64 must agree with its definition: decoding succeeds and re-encoding gives
// the same text.
func TestCanonicalBase64(t *testing.T) {
	byDefinition := func(s string) bool {
		b, err := base64.StdEncoding.DecodeString(s)
		return err == nil && base64.StdEncoding.EncodeToString(b) == s
	}
	cases := []string{"", "YQ==", "YR==", "YWI=", "YWJ=", "YWJj", "YQ", "YQ=", "Y===", "====", "YQ==YQ==", "YW\nJj", "ab-_", "YWJj\n", "AAAA", "////", "+/+/"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "AQgwBRhx+/=\n-_ "
	for range 20000 {
		b := make([]byte, 4*(1+r.IntN(3))+r.IntN(2))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for i := range 50 {
		cases = append(cases, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", i))))
	}
	for _, s := range cases {
		if got, want := canonicalBase64(s), byDefinition(s); got != want {
			t.Errorf("canonicalBase64(%q) = %v, want %v", s, got, want)
		}
	}
	for i := range 10 {
		s := base64.StdEncoding.EncodeToString(make([]byte, i))
		qt.Check(t, decodedLen(s), qt.Equals, i)
	}
}

// Oversized values fail on their length before any pattern runs over them, with the same
// message as the schema would give.
func TestOversizedValuesFailOnLength(t *testing.T) {
	v := validator(t)
	huge := strings.Repeat("a", 5<<20)
	tests := []struct {
		op, body string
		want     string
	}{
		{"send", obj(sendBase, map[string]any{"subject": huge}), "subject: must be a subject of at most 998 characters without line breaks"},
		{"createInbox", obj(map[string]any{"username": huge}, nil), "username: must be a username of 1-64 characters"},
		{"send", obj(sendBase, map[string]any{"to": []string{huge}}), "to[0]: must be an email address of at most 254 characters"},
		{"updateInbox", obj(map[string]any{"group": huge}, nil), "group: must be a group name of 1-64 characters"},
		{"send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"filename": huge})}}), "attachments[0].filename: must be a file name of 1-200 characters"},
		{"send", obj(sendBase, map[string]any{"attachments": []any{attachment(map[string]any{"content": huge[:2796208]})}}), "attachments[0].content: must be standard base64 with padding, at most 2,796,204 characters"},
		{"updateMessageLabels", obj(map[string]any{"addLabels": []string{huge}}, nil), "addLabels[0]: must be a label of 1-64 characters"},
	}
	for _, tt := range tests {
		err := v.Body(tt.op, []byte(tt.body))
		qt.Assert(t, err, qt.Not(qt.IsNil))
		qt.Check(t, strings.HasPrefix(err.Error(), tt.want), qt.IsTrue, qt.Commentf("got %q, want %q...", err, tt.want))
	}
	qt.Check(t, v.Path("inboxId", huge), qt.ErrorMatches, "inboxId: must be an email address of at most 254 characters")
	qt.Check(t, v.Path("messageId", huge), qt.ErrorMatches, "messageId: must be a Message-ID of 1-998 characters without CR, LF or NUL")
}

// The validator leaves the base64 pattern to precheck; the OpenAPI document keeps it.
func TestBase64PatternStaysInTheDocument(t *testing.T) {
	c := qt.New(t)
	v := validator(t)
	content := v.src.contracts["send"].body["properties"].(map[string]any)["attachments"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["content"].(map[string]any)
	c.Check(content["pattern"], qt.Equals, "^[A-Za-z0-9+/]*={0,2}$")
	c.Check(content["contentEncoding"], qt.Equals, "base64")
	stripped := forValidation(v.src.contracts["send"].body)["properties"].(map[string]any)["attachments"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["content"].(map[string]any)
	c.Check(stripped["pattern"], qt.IsNil)
	c.Check(stripped["maxLength"], qt.Not(qt.IsNil))
}
