package protect

import (
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// parseHeader joins a folded field's lines with single spaces, keeps repeated fields
// apart, and skips lines that are not fields.
func TestParseHeaderUnfolds(t *testing.T) {
	var long strings.Builder
	long.WriteString("X-Long: w0")
	want := []string{"w0"}
	for i := 1; i < 2000; i++ {
		long.WriteString("\r\n\tw" + strings.Repeat("x", i%7))
		want = append(want, "w"+strings.Repeat("x", i%7))
	}
	raw := "Received: from a\r\n by b\r\n\twith c\r\nnot a field\r\nReceived: from d\r\nSubject:\r\n  Hello\r\n" +
		long.String() + "\r\n\r\nbody: not a header\r\n"
	h := parseHeader([]byte(raw))
	c := qt.New(t)
	c.Assert(h.all("received"), qt.DeepEquals, []string{"from a by b with c", "from d"})
	c.Assert(h.all("Subject"), qt.DeepEquals, []string{" Hello"})
	c.Assert(h.all("X-Long"), qt.DeepEquals, []string{strings.Join(want, " ")})
	c.Assert(h.has("body"), qt.IsFalse)
}

// Bare LF line ends read as CRLF ones do, and a CR not before an LF stays in its value.
func TestParseHeaderLineEnds(t *testing.T) {
	c := qt.New(t)
	for _, raw := range []string{
		"From: a@example.com\nSubject: one\n two\nX-Cr: a\rb\n\nbody: no\n",
		"From: a@example.com\r\nSubject: one\r\n two\r\nX-Cr: a\rb\r\n\r\nbody: no\r\n",
		"From: a@example.com\r\nSubject: one\n two\r\nX-Cr: a\rb\n\nbody: no\n",
	} {
		h := parseHeader([]byte(raw))
		c.Assert(h.all("from"), qt.DeepEquals, []string{"a@example.com"}, qt.Commentf("%q", raw))
		c.Assert(h.all("subject"), qt.DeepEquals, []string{"one two"}, qt.Commentf("%q", raw))
		c.Assert(h.all("x-cr"), qt.DeepEquals, []string{"a\rb"}, qt.Commentf("%q", raw))
		c.Assert(h.has("body"), qt.IsFalse, qt.Commentf("%q", raw))
	}
}
