package search

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"invoice", "invoice"},
		{"Invoice MARCH", "invoice AND march"},
		{`"quarterly report"`, `"quarterly report"`},
		{`"Quarterly Report`, `"quarterly report"`}, // unclosed quote: a phrase to the end
		{`""`, ""},
		{"-newsletter invoice", "-newsletter AND invoice"},
		{"- invoice", "invoice"}, // a lone minus is nothing
		{"-", ""},
		{"--spam", "-spam"},
		{"invoice OR receipt", "invoice OR receipt"},
		{"a b or c", "a AND b OR c"}, // OR binds tighter than AND
		{"OR invoice OR", "invoice"}, // dangling ORs are ignored
		{"invoice or or receipt", "invoice OR receipt"},
		{"from:alice@example.com", "from:alice@example.com"},
		{"From:Example.COM", "from:example.com"},
		{`subject:"weekly report"`, `subject:"weekly report"`},
		{`to:bob -from:carol`, "to:bob AND -from:carol"},
		{"has:attachment", "has:attachment"},
		{"has:pdf", `"has pdf"`}, // not an operator value: plain text
		{"before:2026-01-31 after:2025/12/01", "before:2026-01-31 AND after:2025-12-01"},
		{"before:yesterday", `"before yesterday"`},
		{"from:", ""},
		{"alice@example.com", "alice@example.com"},
		{"follow-up", "follow-up"},
		{"foo/bar", `"foo bar"`},
		{"!!! ???", ""},
		{"東京", `"東 京"`},
		{`say "hello world" -"bad news"`, `say AND "hello world" AND -"bad news"`},
		{"café", "café"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			qt.Assert(t, Parse(tc.in).String(), qt.Equals, tc.want)
		})
	}
}

func TestParseCapsClauses(t *testing.T) {
	in := ""
	for i := 0; i < 100; i++ {
		in += "w "
	}
	q := Parse(in)
	qt.Assert(t, len(q.groups), qt.Equals, MaxClauses)
}

func TestTokenize(t *testing.T) {
	var got []string
	tokenize("Mail from Alice.Smith@Mail.Example.COM, re: v1.2 follow-up", func(tk token) { got = append(got, tk.term) })
	qt.Assert(t, got, qt.DeepEquals, []string{
		"mail", "from", "alice", "smith", "mail", "example", "com",
		"alice.smith@mail.example.com", "mail.example.com", "example.com",
		"re", "v1", "2", "v1.2", "follow", "up", "follow-up",
	})
}

func TestMatchesPhrase(t *testing.T) {
	d := &Doc{Subject: "Lunch", Body: "I like the red apple. Apple red is not a thing.", From: "alice@example.com", Attachments: []string{"menu.pdf"}}
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{`"red apple"`, true},
		{`"apple red"`, true},
		{`"red thing"`, false},
		{`-"red apple"`, false},
		{`"red apple" has:attachment`, true},
		{`menu.pdf`, true},
		{`"like red"`, false},
		{`example.com`, true},
		{`lunch OR "blue sky"`, true},
	} {
		qt.Check(t, Parse(tc.q).matches(d), qt.Equals, tc.want, qt.Commentf("%s", tc.q))
	}
}

func TestMatchesExported(t *testing.T) {
	d := &Doc{Subject: "Your code", Body: "The code is 123456.", From: "noreply@shop.example"}
	qt.Check(t, Parse("code from:shop.example").Matches(d), qt.IsTrue)
	qt.Check(t, Parse("invoice").Matches(d), qt.IsFalse)
	qt.Check(t, Parse(`"" -`).Matches(d), qt.IsFalse, qt.Commentf("an empty query matches nothing, as a search"))
}
