package search

import (
	"testing"
)

// FuzzParse: whatever a client types as a search query, the parser must not panic (nothing
// typed is an error), keeps at most MaxClauses clauses, and never yields a word clause
// without terms. scripts/test.sh runs it for a bounded time; crashers stay in
// testdata/fuzz/FuzzParse as regression cases.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"invoice march", `"quarterly report"`, `"unclosed quote`, "invoice -newsletter", `-"a phrase"`, "-from:x",
		"invoice OR receipt", "a b OR c", "OR invoice OR", "from:alice from:alice@example.com from:example.com",
		"to:bob", `subject:"weekly report"`, "has:attachment", "has:pdf", "before:2026-01-31 after:2026/01/01",
		"before:yesterday", "alice@example.com follow-up v1.2 o'brien a+b", "!!! ???", "東京 café", "-", "--spam",
		"from:", `""`, "a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg hh",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Parse(s)
		n := 0
		for _, g := range q.groups {
			if len(g) == 0 {
				t.Fatalf("%q: an empty group", s)
			}
			for _, c := range g {
				n++
				if c.kind == kWords {
					if len(c.terms) == 0 {
						t.Fatalf("%q: a word clause without terms", s)
					}
					for _, term := range c.terms {
						if term == "" {
							t.Fatalf("%q: an empty term", s)
						}
					}
				}
			}
		}
		if n > MaxClauses {
			t.Fatalf("%q: %d clauses", s, n)
		}
		if q.Empty() != (n == 0) {
			t.Fatalf("%q: Empty() is %v with %d clauses", s, q.Empty(), n)
		}
		_ = q.String()
	})
}

// FuzzSegment: for any texts, the segment builder writes the bytes zapx writes
// (segment_test.go). The texts make three messages, the third a copy of the first.
func FuzzSegment(f *testing.F) {
	f.Add("Invoice for March", "Alice <alice@example.com>", "the report of the week, café 東京", "pdf")
	f.Add("", "", "", "")
	f.Add("a a a a", "b", "the of the of the", "")
	f.Fuzz(func(t *testing.T, subject, from, body, attachment string) {
		ds := []*Doc{
			{ID: 1, Inbox: 1, TS: 1.7e12, Subject: subject, From: from, To: []string{body}, Body: body},
			{ID: 2, Inbox: 2, TS: -5, Subject: body, From: subject, Body: subject + " " + body, Attachments: []string{attachment}},
			{ID: 3, Inbox: 1, TS: 1.7e12, Subject: subject, From: from, To: []string{body}, Body: body, Category: attachment},
		}
		checkSameSegment(t, analyzedDocs(ds))
	})
}
