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
