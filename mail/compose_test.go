package mail

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	qt "github.com/frankban/quicktest"
)

var composeDate = time.Date(2026, 9, 20, 18, 7, 46, 0, time.UTC)

func baseOutgoing() Outgoing {
	return Outgoing{
		From:          "me@inbox.test",
		FromName:      "Inbox Bot",
		To:            []string{"alice@x.test"},
		Subject:       "Hello",
		Text:          "Hello Alice",
		MessageID:     "<m1@inbox.test>",
		AutoSubmitted: "auto-generated",
		Date:          composeDate,
	}
}

// assertWireSafe checks what every MTA relies on: CRLF only, no line over
// 998 octets, and no Bcc header.
func assertWireSafe(c *qt.C, raw []byte) {
	c.Helper()
	c.Check(bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")), qt.IsFalse, qt.Commentf("bare LF"))
	c.Check(bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\r")), qt.IsFalse, qt.Commentf("bare CR"))
	c.Check(bytes.HasSuffix(raw, []byte("\r\n")), qt.IsTrue)
	for _, line := range bytes.Split(raw, []byte("\r\n")) {
		c.Check(len(line) <= 998, qt.IsTrue, qt.Commentf("line of %d octets", len(line)))
	}
	header := raw[:bytes.Index(raw, []byte("\r\n\r\n"))]
	c.Check(bytes.Contains(bytes.ToLower(header), []byte("\nbcc:")), qt.IsFalse)
}

func TestComposeRoundTrip(t *testing.T) {
	pdf := testPDF
	tests := []struct {
		name string
		edit func(o *Outgoing)
	}{{
		name: "plain ascii",
		edit: func(o *Outgoing) {},
	}, {
		name: "text ending in a newline",
		edit: func(o *Outgoing) { o.Text = "Line one\nLine two\n" },
	}, {
		name: "non-ascii subject, name and text",
		edit: func(o *Outgoing) {
			o.FromName = "Jürgen Müller"
			o.Subject = "Grüße — 会議のお知らせ 🎉"
			o.Text = "Grüße aus München.\n日本語のテキスト。\n"
		},
	}, {
		name: "mostly non-ascii text goes base64",
		edit: func(o *Outgoing) { o.Text = strings.Repeat("日本語のテキスト。", 40) },
	}, {
		name: "text and html",
		edit: func(o *Outgoing) {
			o.Text = "Plain version"
			o.HTML = "<p>HTML <b>version</b> — é</p>"
		},
	}, {
		name: "html only",
		edit: func(o *Outgoing) {
			o.Text = ""
			o.HTML = "<p>Only <a href=\"https://x.test/\">html</a></p>"
		},
	}, {
		name: "attachments",
		edit: func(o *Outgoing) {
			o.HTML = "<p>see attached</p>"
			o.Attachments = []Attachment{
				{Filename: "report.pdf", ContentType: "application/pdf", Content: pdf},
				{Filename: "naïve résumé — " + strings.Repeat("長い名前", 40) + ".txt", ContentType: "text/plain", Content: []byte("caf\xe9 bytes stay \x00 as they are\r\n")},
				{Filename: "empty.bin", ContentType: "Application/Octet-Stream", Content: []byte{}},
			}
		},
	}, {
		name: "long subject and lines",
		edit: func(o *Outgoing) {
			o.Subject = strings.Repeat("word ", 150) + strings.Repeat("x", 900)
			o.Text = strings.Repeat("a long line without breaks ", 100)
		},
	}, {
		name: "subjects that would otherwise not survive headers",
		edit: func(o *Outgoing) { o.Subject = "  =?utf-8?q?not_encoded?=  double  space\t" },
	}, {
		name: "text with equals signs and trailing spaces",
		edit: func(o *Outgoing) { o.Text = "a=b  \nc =3D d\t\n=" },
	}, {
		name: "reply headers",
		edit: func(o *Outgoing) {
			o.AutoSubmitted = "auto-replied"
			o.Subject = "Re: Hello"
			o.InReplyTo = "<orig@x.test>"
			o.References = []string{"<root@x.test>", "<orig@x.test>"}
		},
	}}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			o := baseOutgoing()
			o.Cc = []string{"Carol@X.test"}
			o.Bcc = []string{"secret@hidden.test"}
			test.edit(&o)

			raw, err := Compose(o)
			c.Assert(err, qt.IsNil)
			assertWireSafe(c, raw)
			c.Check(bytes.Contains(raw, []byte("secret@hidden.test")), qt.IsFalse)

			p, err := Parse(raw)
			c.Assert(err, qt.IsNil)
			c.Check(p.MessageID, qt.Equals, o.MessageID)
			c.Check(p.From, qt.Equals, "me@inbox.test")
			c.Check(p.To, qt.DeepEquals, []string{"alice@x.test"})
			c.Check(p.Cc, qt.DeepEquals, []string{"carol@x.test"})
			c.Check(p.Subject, qt.Equals, o.Subject)
			c.Check(p.Date.Equal(composeDate), qt.IsTrue)
			c.Check(p.InReplyTo, qt.Equals, o.InReplyTo)
			if o.References == nil {
				o.References = []string{}
			}
			c.Check(p.References, qt.DeepEquals, o.References)
			if o.Text != "" {
				c.Check(p.Text, qt.Equals, o.Text)
			} else {
				c.Check(p.Text, qt.Equals, HTMLToText(o.HTML))
			}
			c.Check(p.HTML, qt.Equals, o.HTML)

			want := []Attachment(nil)
			for _, a := range o.Attachments {
				want = append(want, Attachment{Filename: a.Filename, ContentType: strings.ToLower(a.ContentType), Content: a.Content})
			}
			if len(want) > 0 {
				c.Check(p.Attachments, qt.DeepEquals, want)
			} else {
				c.Check(p.Attachments, qt.HasLen, 0)
			}
			c.Check(headerLine(raw, "Auto-Submitted"), qt.Equals, o.AutoSubmitted)
			c.Check(headerLine(raw, "MIME-Version"), qt.Equals, "1.0")
		})
	}
}

// headerLine returns one unfolded header of raw, "" when absent.
func headerLine(raw []byte, name string) string {
	header := string(raw[:bytes.Index(raw, []byte("\r\n\r\n"))])
	header = strings.ReplaceAll(header, "\r\n ", " ")
	for _, line := range strings.Split(header, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func TestComposeHeaders(t *testing.T) {
	c := qt.New(t)
	o := baseOutgoing()
	o.FromName = "Smith, Bob"
	raw, err := Compose(o)
	c.Assert(err, qt.IsNil)
	c.Check(headerLine(raw, "From"), qt.Equals, `"Smith, Bob" <me@inbox.test>`)
	c.Check(headerLine(raw, "Date"), qt.Equals, "Sun, 20 Sep 2026 18:07:46 +0000")
	c.Check(headerLine(raw, "Subject"), qt.Equals, "Hello")
	c.Check(headerLine(raw, "Content-Type"), qt.Equals, "text/plain; charset=utf-8")

	o.FromName = "Zoë"
	raw, err = Compose(o)
	c.Assert(err, qt.IsNil)
	c.Check(headerLine(raw, "From"), qt.Equals, "=?utf-8?b?Wm/Dqw==?= <me@inbox.test>")

	o.FromName = ""
	raw, err = Compose(o)
	c.Assert(err, qt.IsNil)
	c.Check(headerLine(raw, "From"), qt.Equals, "me@inbox.test")
}

func TestComposeQuotesOddLocalParts(t *testing.T) {
	c := qt.New(t)
	o := baseOutgoing()
	o.To = []string{"a,b@x.test"}
	raw, err := Compose(o)
	c.Assert(err, qt.IsNil)
	c.Check(headerLine(raw, "To"), qt.Equals, `"a,b"@x.test`)
	p, err := Parse(raw)
	c.Assert(err, qt.IsNil)
	c.Check(p.To, qt.DeepEquals, []string{"a,b@x.test"})
}

func TestComposeRejects(t *testing.T) {
	tests := []struct {
		name string
		edit func(o *Outgoing)
	}{
		{"an extra header Compose writes", func(o *Outgoing) { o.Headers = map[string]string{"from": "a@x.test"} }},
		{"auto-submitted twice", func(o *Outgoing) { o.Headers = map[string]string{"auto-submitted": "auto-replied"} }},
		{"an extra header name with a colon", func(o *Outgoing) { o.Headers = map[string]string{"X-A:": "1"} }},
		{"line break in an extra header", func(o *Outgoing) { o.Headers = map[string]string{"List-Id": "a\r\nBcc: victim@x.test"} }},
		{"line break in reply-to", func(o *Outgoing) { o.ReplyTo = []string{"a@x.test\r\nBcc: victim@x.test"} }},
		{"line break in subject", func(o *Outgoing) { o.Subject = "Hi\r\nBcc: victim@x.test" }},
		{"bare LF in subject", func(o *Outgoing) { o.Subject = "Hi\nthere" }},
		{"line break in display name", func(o *Outgoing) { o.FromName = "Bot\r\nX-Evil: 1" }},
		{"line break in recipient", func(o *Outgoing) { o.To = []string{"a@x.test\r\nBcc: victim@x.test"} }},
		{"two recipients in one entry", func(o *Outgoing) { o.Cc = []string{"a@x.test, b@x.test"} }},
		{"invalid bcc", func(o *Outgoing) { o.Bcc = []string{"nobody"} }},
		{"invalid from", func(o *Outgoing) { o.From = "inbox" }},
		{"missing message id", func(o *Outgoing) { o.MessageID = "" }},
		{"line break in in-reply-to", func(o *Outgoing) { o.InReplyTo = "<a@x.test>\r\nX: y" }},
		{"line break in references", func(o *Outgoing) { o.References = []string{"<a@x.test>\n"} }},
		{"line break in auto-submitted", func(o *Outgoing) { o.AutoSubmitted = "auto-replied\r\nX: y" }},
		{"line break in content type", func(o *Outgoing) {
			o.Attachments = []Attachment{{Filename: "a", ContentType: "text/plain\r\nX: y", Content: []byte("a")}}
		}},
		{"line break in filename", func(o *Outgoing) {
			o.Attachments = []Attachment{{Filename: "a\r\n.txt", ContentType: "text/plain", Content: []byte("a")}}
		}},
	}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			o := baseOutgoing()
			test.edit(&o)
			_, err := Compose(o)
			c.Check(err, qt.IsNotNil)
		})
	}
}

func TestNewMessageID(t *testing.T) {
	c := qt.New(t)
	a, b := NewMessageID("inbox.test"), NewMessageID("inbox.test")
	c.Check(a, qt.Matches, `<[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}@inbox\.test>`)
	c.Check(a, qt.Not(qt.Equals), b)
}

func FuzzComposeRoundTrip(f *testing.F) {
	f.Add("Hello", "Body text\n", "Bot")
	f.Add("Grüße 🎉", "日本語", "Zoë")
	f.Add("  =?x?q?y?=  ", "a=b \n", "")
	f.Fuzz(func(t *testing.T, subject, text, name string) {
		if strings.ContainsAny(subject+name, "\r\n") || !utf8.ValidString(subject) || !utf8.ValidString(text) || !utf8.ValidString(name) ||
			strings.ContainsAny(text, "\r\x00") || strings.TrimSpace(text) == "" {
			t.Skip()
		}
		o := baseOutgoing()
		o.Subject, o.Text, o.FromName = subject, text, name
		raw, err := Compose(o)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		// Parse turns control characters other than tab into spaces.
		want := strings.Map(func(r rune) rune {
			if r != '\t' && unicode.IsControl(r) {
				return ' '
			}
			return r
		}, Clean(subject))
		if p.Subject != want {
			t.Fatalf("subject %q came back as %q", subject, p.Subject)
		}
		if p.Text != text {
			t.Fatalf("text %q came back as %q", text, p.Text)
		}
	})
}

// Mail injected by the test controls carries Reply-To and header fields of its own.
func TestComposeWritesReplyToAndExtraHeaders(t *testing.T) {
	c := qt.New(t)
	o := baseOutgoing()
	o.AutoSubmitted = "" // the injected header says it instead
	o.ReplyTo = []string{"desk@x.test"}
	o.Headers = map[string]string{"List-Id": "<news.x.test>", "Auto-Submitted": "auto-generated"}
	raw, err := Compose(o)
	c.Assert(err, qt.IsNil)
	p, err := Parse(raw)
	c.Assert(err, qt.IsNil)
	c.Assert(p.ReplyTo, qt.DeepEquals, []string{"desk@x.test"})
	c.Assert(string(raw), qt.Contains, "\r\nList-Id: <news.x.test>\r\n")
	c.Assert(string(raw), qt.Contains, "\r\nAuto-Submitted: auto-generated\r\n")
	o.Text, o.HTML = "", ""
	_, err = Compose(o) // an empty body is a message too
	c.Assert(err, qt.IsNil)
}
