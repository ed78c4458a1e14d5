package mail

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

func TestNormalizeAddress(t *testing.T) {
	tests := []struct {
		in     string
		want   string
		wantOK bool
	}{
		{"Bob@Example.TEST", "bob@example.test", true},
		{"  bob@example.test  ", "bob@example.test", true},
		{"Bob Smith <Bob@Example.test>", "bob@example.test", true},
		{`"Smith, Bob" <bob@example.test>`, "bob@example.test", true},
		{"=?utf-8?q?J=C3=BCrgen?= <j@example.test>", "j@example.test", true},
		{"John Q. Public <jqp@example.test>", "jqp@example.test", true},
		{"", "", false},
		{"not an address", "", false},
		{"@example.test", "", false},
		{"bob@", "", false},
		{"a@x.test, b@y.test", "", false},
		{"bob@example.test\r\nBcc: evil@x.test", "", false},
	}
	c := qt.New(t)
	for _, test := range tests {
		got, ok := NormalizeAddress(test.in)
		c.Check(ok, qt.Equals, test.wantOK, qt.Commentf("%q", test.in))
		c.Check(got, qt.Equals, test.want, qt.Commentf("%q", test.in))
	}
}

func TestParseAddressList(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"empty", nil, []string{}},
		{"plain list", []string{"A@x.test, b@y.test"}, []string{"a@x.test", "b@y.test"}},
		{"group flattened", []string{"team: a@x.test, B@y.test;, c@z.test"}, []string{"a@x.test", "b@y.test", "c@z.test"}},
		{"empty group", []string{"undisclosed-recipients:;"}, []string{}},
		{"duplicates dropped", []string{"a@x.test, A@X.test", "a@x.test"}, []string{"a@x.test"}},
		{"several headers", []string{"a@x.test", "b@y.test"}, []string{"a@x.test", "b@y.test"}},
		{"missing commas", []string{"<a@x.test> <b@y.test>"}, []string{"a@x.test", "b@y.test"}},
		{"garbage around addresses", []string{`a@x.test; "broken <b@y.test>, ,, (c) c@z.test`}, []string{"a@x.test", "b@y.test", "c@z.test"}},
	}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			c.Check(parseAddressList(test.in), qt.DeepEquals, test.want)
		})
	}
}
