package schema

import (
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestValidEmail(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"alice@example.com", true},
		{"ALICE@EXAMPLE.COM", true},
		{"a@b.co", true},
		{"first.last@sub.example.co.uk", true},
		{"a+tag@example.com", true},
		{"under_score@example.com", true},
		{"o'brien@example.ie", true},
		{"-a-@example.com", true},
		{"a@xn--bcher-kva.example", true},
		{"a@1.2.3.com", true},
		{strings.Repeat("u", 64) + "@" + strings.Repeat("a.", 93) + "com", true}, // 254

		{strings.Repeat("u", 65) + "@" + strings.Repeat("a.", 93) + "com", false}, // 255
		{"", false},
		{"alice", false},
		{"@example.com", false},
		{"alice@", false},
		{".alice@example.com", false},
		{"alice.@example.com", false},
		{"al..ice@example.com", false},
		{"alice'@example.com", false},
		{"alice@example", false},
		{"alice@example.c", false},
		{"alice@example.123", false},
		{"alice@.example.com", false},
		{"alice@example..com", false},
		{"alice@-example.com", false},
		{"alice@exa_mple.com", false},
		{"al ice@example.com", false},
		{"alice@example.com ", false},
		{"Alice <alice@example.com>", false},
		{"alice@example.com\n", false},
		{"a@b@example.com", false},
		{"alice!@example.com", false},
		{"élodie@example.com", false},
	}
	for _, tt := range tests {
		qt.Check(t, ValidEmail(tt.addr), qt.Equals, tt.want, qt.Commentf("%q", tt.addr))
	}
}

// The rule lives in json/defs.json once: ValidEmail and the schemas of recipients and
// inboxId must agree.
func TestValidEmailMatchesTheSchemas(t *testing.T) {
	v := validator(t)
	for _, addr := range []string{"alice@example.com", "al..ice@example.com", "a@b.c", "x@y.zz", strings.Repeat("u", 300) + "@example.com"} {
		pathOK := v.Path("inboxId", addr) == nil
		sendOK := v.Body("send", []byte(obj(sendBase, map[string]any{"to": []string{addr}}))) == nil
		qt.Check(t, pathOK, qt.Equals, ValidEmail(addr), qt.Commentf(addr))
		qt.Check(t, sendOK, qt.Equals, ValidEmail(addr), qt.Commentf(addr))
	}
}
