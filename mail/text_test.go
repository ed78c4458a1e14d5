package mail

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	qt "github.com/frankban/quicktest"
)

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x00b", "ab"},
		{"bad \xff\xfe byte", "bad \uFFFD byte"},
		{"\xed\xa0\x80 lone surrogate", "\uFFFD lone surrogate"},
		{"日本語", "日本語"},
	}
	c := qt.New(t)
	for _, test := range tests {
		c.Check(Clean(test.in), qt.Equals, test.want, qt.Commentf("%q", test.in))
	}
}

func TestPreview(t *testing.T) {
	long := strings.Repeat("é", 250)
	tests := []struct{ name, in, want string }{
		{"collapses whitespace", "  Hello,\n\n\tworld  \r\n ", "Hello, world"},
		{"short text unchanged", "Hi", "Hi"},
		{"empty", "", ""},
		{"cut at 200 runes, not bytes", long, strings.Repeat("é", 200)},
		{"no trailing space after the cut", strings.Repeat("a", 199) + " b", strings.Repeat("a", 199)},
		{"cleans", "a\x00b", "ab"},
	}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			got := Preview(test.in)
			c.Check(got, qt.Equals, test.want)
			c.Check(utf8.RuneCountInString(got) <= 200, qt.IsTrue)
		})
	}
}

// Preview reads only what it needs; it must say what its definition says: the words
// joined by single spaces, cut to 200 runes, no trailing space.
func TestPreviewRandom(t *testing.T) {
	ref := func(text string) string {
		s := strings.Join(strings.Fields(Clean(text)), " ")
		if utf8.RuneCountInString(s) > previewRunes {
			s = string([]rune(s)[:previewRunes])
		}
		return strings.TrimRightFunc(s, unicode.IsSpace)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	parts := []string{"a", "bc", "é", "東京", " ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u2003", "\x00", "\xff", "word"}
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(260) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		in := b.String()
		if got, want := Preview(in), ref(in); got != want {
			t.Fatalf("Preview(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHTMLToText(t *testing.T) {
	tests := []struct{ name, in, want string }{{
		name: "drops scripts, styles, head and images",
		in:   `<html><head><title>T</title><style>b{}</style></head><body><script>var x;</script><img src="a.png" alt="logo">Hello</body></html>`,
		want: "Hello",
	}, {
		name: "paragraphs and breaks",
		in:   "<p>One</p><p>Two<br>three</p><div>four</div>",
		want: "One\n\nTwo\nthree\n\nfour",
	}, {
		name: "whitespace collapses like a browser",
		in:   "<p>  lots\n\n of   space&nbsp;here </p>",
		want: "lots of space here",
	}, {
		name: "entities are decoded",
		in:   "Fish &amp; chips &lt;3 &eacute;",
		want: "Fish & chips <3 é",
	}, {
		name: "links keep their target",
		in:   `<a href="https://x.test/confirm">Confirm</a> or <a href="https://x.test/">https://x.test/</a> <a href="#top">top</a>`,
		want: "Confirm (https://x.test/confirm) or https://x.test/ top",
	}, {
		name: "lists and tables",
		in:   "<ul><li>a</li><li>b</li></ul><table><tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></table>",
		want: "- a\n- b\n\n1 2\n3 4",
	}, {
		name: "pre keeps its layout",
		in:   "<pre>a  b\n  c</pre>",
		want: "a  b\n  c",
	}, {
		name: "broken markup still reads",
		in:   "<p>unclosed <b>bold <i>text",
		want: "unclosed bold text",
	}, {
		name: "comments are not text",
		in:   "a<!-- hidden -->b",
		want: "ab",
	}}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			c.Check(HTMLToText(test.in), qt.Equals, test.want)
		})
	}
}
