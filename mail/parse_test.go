package mail

import (
	"bytes"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func readEML(c *qt.C, name string) []byte {
	c.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	c.Assert(err, qt.IsNil)
	return raw
}

func parseEML(c *qt.C, name string) *Parsed {
	c.Helper()
	p, err := Parse(readEML(c, name))
	c.Assert(err, qt.IsNil)
	return p
}

// Attachment bytes the generator of testdata/mixed.eml wrote.
var (
	testPDF = append(append([]byte("%PDF-1.4\n1 0 obj<<>>endobj\n"), byteRange(0, 256)...), "\n%%EOF\n"...)
	testPNG = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat(byteRange(200, 256), 3)...)
)

func byteRange(from, to int) []byte {
	var b []byte
	for i := from; i < to; i++ {
		b = append(b, byte(i))
	}
	return b
}

func TestParseFiles(t *testing.T) {
	tests := []struct {
		file  string
		check func(c *qt.C, p *Parsed)
	}{{
		file: "plain.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p, qt.DeepEquals, &Parsed{
				MessageID:     "<plain-1@example.test>",
				From:          "alice@example.test",
				To:            []string{"bob@example.test", "carol@example.test"},
				Cc:            []string{"dave@example.test"},
				ReplyTo:       []string{"replies@example.test"},
				Subject:       "Lunch on Friday?",
				Text:          "Hi Bob,\n\nAre we still on for lunch on Friday?\n\nAlice\n",
				Date:          time.Date(2026, 9, 15, 10, 30, 0, 0, time.FixedZone("", 2*3600)),
				InReplyTo:     "<older@example.test>",
				References:    []string{"<root@example.test>", "<older@example.test>"},
				Attachments:   nil,
				TriageHeaders: map[string]string{"In-Reply-To": "<older@example.test>", "Reply-To": "replies@example.test"},
			})
		},
	}, {
		file: "alternative.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Your order #1234 has shipped. \nTrack it at https://shop.test/track/1234")
			c.Check(p.HTML, qt.Equals, `<html><body><p>Your order <b>#1234</b> has shipped.</p><p><a href="https://shop.test/track/1234">Track it</a></p></body></html>`)
			c.Check(p.Attachments, qt.HasLen, 0)
		},
	}, {
		file: "mixed.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Please find the invoice attached.")
			c.Check(p.HTML, qt.Contains, `<img src="cid:logo@vendor.test"`)
			c.Check(p.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "logo.png", ContentType: "image/png", Content: testPNG},
				{Filename: "Invoice 2026-09.pdf", ContentType: "application/pdf", Content: testPDF},
				{Filename: "attachment", ContentType: "application/octet-stream", Content: []byte("no name, no type")},
			})
		},
	}, {
		file: "forwarded.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Fwd: Contract draft")
			c.Check(p.Text, qt.Matches, `(?s)FYI, see the forwarded message below\.\n\n`+
				`-+ Forwarded message -+\nFrom: counsel@lawyer.test\n.*Subject: Contract draft\n.*\n\nHere is the draft contract\.`)
			c.Assert(p.Attachments, qt.HasLen, 1)
			c.Check(p.Attachments[0].ContentType, qt.Equals, "message/rfc822")
			inner, err := Parse(p.Attachments[0].Content)
			c.Assert(err, qt.IsNil)
			c.Check(inner.MessageID, qt.Equals, "<inner-1@lawyer.test>")
			c.Check(inner.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "draft.txt", ContentType: "text/plain", Content: []byte("Clause 1. Nothing.")},
			})
		},
	}, {
		file: "latin1-qp.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Menu du café")
			c.Check(p.From, qt.Equals, "francois@example.test")
			c.Check(p.Text, qt.Equals, "Café crème et naïveté à la façade.\n"+
				"Une ligne très longue qui est coupée en deux par un saut de ligne doux.\n")
		},
	}, {
		file: "windows1252.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "“Smart quotes” cost €5 – that’s all.\n")
		},
	}, {
		file: "shiftjis.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "会議のお知らせ")
			c.Check(p.Text, qt.Equals, "こんにちは、世界。明日の会議は十時です。\n")
		},
	}, {
		file: "rfc2047.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Grüße aus München and 你好")
			c.Check(p.From, qt.Equals, "juergen@example.test")
		},
	}, {
		file: "broken-base64.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "The text survives.")
			c.Check(p.HTML, qt.Equals, "<p>The HTML survives too.</p>")
			c.Assert(p.Attachments, qt.HasLen, 1)
			c.Check(p.Attachments[0].Filename, qt.Equals, "photo.jpg")
			// The valid prefix of the data is still there.
			c.Check(bytes.HasPrefix(p.Attachments[0].Content, []byte{0xff, 0xd8, 0xff, 0xe0}), qt.IsTrue)
		},
	}, {
		file: "bad-boundary.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "The parts use another boundary.")
			c.Check(p.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "data.zip", ContentType: "application/zip", Content: []byte("PK\x03\x04\n")},
			})
		},
	}, {
		file: "html-only.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.HTML, qt.Contains, "<h1>Welcome&nbsp;aboard</h1>")
			c.Check(p.Text, qt.Equals, "Welcome aboard\n\n"+
				"Please verify your address.\n\n"+
				"Verify now (https://example.test/verify?t=abc)\n\n"+
				"- Fast\n- Free\n\n"+
				"Thanks,\nThe team")
		},
	}, {
		file: "group-to.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.From, qt.Equals, "robot@lists.example.test")
			c.Check(p.To, qt.DeepEquals, []string{"a@x.test", "b@y.test"})
			c.Check(p.Cc, qt.DeepEquals, []string{"john@example.test"})
		},
	}, {
		file: "nul.eml",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Null byte")
			c.Check(p.Text, qt.Equals, "Beforeafter, café, and an invalid byte \uFFFD here.\n")
		},
	}}
	for _, test := range tests {
		qt.New(t).Run(test.file, func(c *qt.C) {
			p := parseEML(c, test.file)
			test.check(c, p)
			assertCleanStrings(c, p)
		})
	}
}

// assertCleanStrings checks the promise every stored string relies on.
func assertCleanStrings(c *qt.C, p *Parsed) {
	c.Helper()
	all := []string{p.MessageID, p.From, p.Subject, p.Text, p.HTML, p.InReplyTo}
	all = append(all, p.To...)
	all = append(all, p.Cc...)
	all = append(all, p.ReplyTo...)
	all = append(all, p.References...)
	for _, a := range p.Attachments {
		all = append(all, a.Filename, a.ContentType)
	}
	for _, s := range all {
		c.Check(utf8.ValidString(s), qt.IsTrue, qt.Commentf("%q", s))
		c.Check(strings.ContainsRune(s, 0), qt.IsFalse, qt.Commentf("%q", s))
	}
	c.Check(p.To, qt.Not(qt.IsNil))
	c.Check(p.Cc, qt.Not(qt.IsNil))
	c.Check(p.ReplyTo, qt.Not(qt.IsNil))
}

func TestParseSyntheticMessageID(t *testing.T) {
	c := qt.New(t)
	raw := readEML(c, "no-message-id.eml")
	first, err := Parse(raw)
	c.Assert(err, qt.IsNil)
	second, err := Parse(bytes.Clone(raw))
	c.Assert(err, qt.IsNil)
	c.Check(first.MessageID, qt.Matches, `<[0-9a-f]{32}@inboxd\.invalid>`)
	c.Check(second.MessageID, qt.Equals, first.MessageID)

	other, err := Parse(append(bytes.Clone(raw), "P.S.\n"...))
	c.Assert(err, qt.IsNil)
	c.Check(other.MessageID, qt.Not(qt.Equals), first.MessageID)
}

// A bare CR survives header parsing; nothing that a reply copies into its headers may
// carry it (found by FuzzParse).
func TestParseThreadHeadersHaveNoLineBreaks(t *testing.T) {
	c := qt.New(t)
	p, err := Parse([]byte("From: a@b.example\r\nIn-Reply-To: <x@y>\r<z@w>\r\n" +
		"References: <a@b>\r<c d@e> <f@g>\r\n\r\nbody\r\n"))
	c.Assert(err, qt.IsNil)
	c.Check(p.InReplyTo, qt.Equals, "<x@y> <z@w>")
	c.Check(p.References, qt.DeepEquals, []string{"<a@b>", "<f@g>"})
}

func TestParseInline(t *testing.T) {
	tests := []struct {
		name  string
		raw   string
		check func(c *qt.C, p *Parsed)
	}{{
		name: "utf-8 body labelled us-ascii",
		raw:  "Subject: x\nContent-Type: text/plain; charset=us-ascii\n\nna\xc3\xafve\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "naïve\n")
		},
	}, {
		name: "iso-8859-1 label with windows-1252 quotes",
		raw:  "Subject: x\nContent-Type: text/plain; charset=iso-8859-1\n\n\x93quoted\x94 caf\xe9\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "“quoted” café\n")
		},
	}, {
		name: "latin1 text labelled utf-8",
		raw:  "Subject: x\nContent-Type: text/plain; charset=utf-8\n\nCaf\xe9 cr\xe8me\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Café crème\n")
		},
	}, {
		name: "utf-8 with one broken byte stays utf-8",
		raw:  "Subject: x\nContent-Type: text/plain; charset=utf-8\n\nCaf\xc3\xa9 \xff\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Café \uFFFD\n")
		},
	}, {
		name: "undeclared 8-bit latin text",
		raw:  "Subject: x\n\nTr\xe8s bien, merci.\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Très bien, merci.\n")
		},
	}, {
		name: "gb2312 base64 body",
		raw:  "Subject: =?gb2312?B?xOO6ww==?=\nContent-Type: text/plain; charset=gb2312\nContent-Transfer-Encoding: base64\n\nxOO6ww==\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "你好")
			c.Check(p.Text, qt.Equals, "你好")
		},
	}, {
		name: "iso-2022-jp body",
		raw:  "Subject: x\nContent-Type: text/plain; charset=iso-2022-jp\n\n\x1b$B$3$s$K$A$O\x1b(B\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "こんにちは\n")
		},
	}, {
		name: "raw 8-bit latin1 subject",
		raw:  "Subject: Caf\xe9\n\nx\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Café")
		},
	}, {
		name: "malformed encoded words",
		raw:  "Subject: =?utf-8?q?Hello world?=\n\nx\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Hello world")
		},
	}, {
		name: "line break smuggled into the subject",
		raw:  "Subject: =?utf-8?q?Hi=0D=0ABcc:_x@y.test?=\n\nx\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "Hi  Bcc: x@y.test")
		},
	}, {
		name: "stray equals in quoted-printable",
		raw:  "Subject: x\nContent-Transfer-Encoding: quoted-printable\n\n1 + 1 = 2, a=3Db, soft=\nbreak\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "1 + 1 = 2, a=b, softbreak\n")
		},
	}, {
		name: "format=flowed",
		raw:  "Subject: x\nContent-Type: text/plain; charset=utf-8; format=flowed\n\nThis line was \nwrapped by the sender.\n>quoted\n-- \nsig\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "This line was wrapped by the sender.\n>quoted\n-- \nsig\n")
		},
	}, {
		name: "no headers at all",
		raw:  "just some words\nwithout any header\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "just some words\nwithout any header\n")
			c.Check(p.MessageID, qt.Matches, `<[0-9a-f]{32}@inboxd\.invalid>`)
			c.Check(p.From, qt.Equals, "")
		},
	}, {
		name: "mbox From line",
		raw:  "From alice@x.test Tue Sep 15 10:30:00 2026\nFrom: Alice <alice@x.test>\nSubject: saved from mbox\n\nbody\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.From, qt.Equals, "alice@x.test")
			c.Check(p.Subject, qt.Equals, "saved from mbox")
			c.Check(p.Text, qt.Equals, "body\n")
		},
	}, {
		name: "headers only",
		raw:  "Subject: only headers\nFrom: a@b.test\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Subject, qt.Equals, "only headers")
			c.Check(p.Text, qt.Equals, "")
		},
	}, {
		name: "multipart without boundary parameter",
		raw:  "Subject: x\nContent-Type: multipart/mixed\n\n--zz\nContent-Type: text/plain\n\nfound me\n--zz--\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "found me")
		},
	}, {
		name: "wrong boundary and no delimiter lines",
		raw:  "Subject: x\nContent-Type: multipart/mixed; boundary=b\n\nJust text after all.\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Just text after all.\n")
		},
	}, {
		name: "empty plain alternative does not hide the html",
		raw:  "Subject: x\nContent-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/plain\n\n\n--b\nContent-Type: text/html\n\n<p>Hi <b>there</b></p>\n--b--\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Hi there")
			c.Check(p.HTML, qt.Equals, "<p>Hi <b>there</b></p>")
		},
	}, {
		name: "single-part base64 body",
		raw:  "Subject: x\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: base64\n\nSGVsbG8sIHfDtnJsZCE=\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "Hello, wörld!")
		},
	}, {
		name: "whole message is a pdf",
		raw:  "Subject: x\nContent-Type: application/pdf; name=scan.pdf\nContent-Transfer-Encoding: base64\n\nJVBERi0=\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "")
			c.Check(p.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "scan.pdf", ContentType: "application/pdf", Content: []byte("%PDF-")},
			})
		},
	}, {
		name: "unterminated multipart",
		raw:  "Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nfirst\n--b\nContent-Type: text/plain\n\nsecond, cut off",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "first\nsecond, cut off")
		},
	}, {
		name: "text attachment kept byte for byte",
		raw: "Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nbody\n" +
			"--b\nContent-Type: text/csv; charset=windows-1252\nContent-Disposition: attachment; filename=\"../../prices.csv\"\n\nitem;\x80\n--b--\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "body")
			c.Check(p.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "prices.csv", ContentType: "text/csv", Content: []byte("item;\x80")},
			})
		},
	}, {
		name: "inline text part with a filename is an attachment",
		raw: "Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nbody\n" +
			"--b\nContent-Type: text/plain; name=notes.txt\nContent-Disposition: inline; filename=notes.txt\n\nnotes\n--b--\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Text, qt.Equals, "body")
			c.Check(p.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "notes.txt", ContentType: "text/plain", Content: []byte("notes")},
			})
		},
	}, {
		name: "rfc 2231 filename and bad content type",
		raw: "Subject: x\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nbody\n" +
			"--b\nContent-Type: bogus\nContent-Disposition: attachment; filename*=utf-8''%E2%82%AC%20rate.txt\n\nx\n--b--\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Attachments, qt.DeepEquals, []Attachment{
				{Filename: "€ rate.txt", ContentType: "application/octet-stream", Content: []byte("x")},
			})
		},
	}, {
		name: "message id without brackets and unparseable date",
		raw:  "Message-ID: abc@host.test\nDate: yesterday-ish\nSubject: x\n\nx\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.MessageID, qt.Equals, "<abc@host.test>")
			c.Check(p.Date.IsZero(), qt.IsTrue)
		},
	}, {
		name: "date with trailing comment",
		raw:  "Date: Tue, 15 Sep 2026 10:30:00 -0700 (PDT)\nSubject: x\n\nx\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.Date.UTC(), qt.Equals, time.Date(2026, 9, 15, 17, 30, 0, 0, time.UTC))
		},
	}, {
		name: "broken address list",
		raw:  "From: John Q. Public, Esq. <JQP@Example.test>\nTo: a@x.test, \"unclosed <b@y.test>, c@z.test,,\nSubject: x\n\nx\n",
		check: func(c *qt.C, p *Parsed) {
			c.Check(p.From, qt.Equals, "jqp@example.test")
			c.Check(p.To, qt.Contains, "a@x.test")
		},
	}}
	for _, test := range tests {
		qt.New(t).Run(test.name, func(c *qt.C) {
			p, err := Parse([]byte(test.raw))
			c.Assert(err, qt.IsNil)
			test.check(c, p)
			assertCleanStrings(c, p)
		})
	}
}

func TestParseEmpty(t *testing.T) {
	c := qt.New(t)
	for _, raw := range []string{"", " \r\n\t\n"} {
		_, err := Parse([]byte(raw))
		c.Check(err, qt.IsNotNil)
	}
}

func TestCountMultiparts(t *testing.T) {
	c := qt.New(t)
	c.Check(countMultiparts([]byte("MuLtIpArT/mixed multipart/x /multipart multipart")), qt.Equals, 2)
	c.Check(countMultiparts(nil), qt.Equals, 0)
}

func TestParseManyMultipartsDoesNotRecurse(t *testing.T) {
	c := qt.New(t)
	var b strings.Builder
	b.WriteString("Subject: bomb\nContent-Type: multipart/mixed; boundary=b0\n\n")
	for i := 1; i <= maxMultiparts+1; i++ {
		b.WriteString("--b" + strconv.Itoa(i-1) + "\nContent-Type: multipart/mixed; boundary=b" + strconv.Itoa(i) + "\n\n")
	}
	p, err := Parse([]byte(b.String()))
	c.Assert(err, qt.IsNil)
	c.Check(p.Subject, qt.Equals, "bomb")
}

// FuzzParse runs in scripts/test.sh for a bounded time; its seeds are every .eml the
// project keeps (real clients' mail and broken mail), and crashers it finds stay in
// testdata/fuzz/FuzzParse as regression cases.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.eml")
	if err != nil {
		f.Fatal(err)
	}
	more, _ := filepath.Glob("../fixtures/eml/*.eml")
	files = append(files, more...)
	// An encoded word that decodes to a line break: a reply's Subject must not carry it.
	f.Add([]byte("Subject: =?utf-8?q?Hi=0D=0ABcc:_x@evil.example?=\r\nFrom: a@b.example\r\n\r\nbody\r\n"))
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := Parse(raw)
		if err != nil {
			if len(bytes.TrimSpace(raw)) != 0 {
				t.Fatalf("Parse rejected non-empty input: %v", err)
			}
			return
		}
		assertCleanStrings(qt.New(t), p)
		if !db.ValidMessageID(p.MessageID) {
			t.Fatalf("bad message id %q", p.MessageID)
		}
		// These reach the headers of a reply or a download: no line breaks.
		for _, s := range append([]string{p.Subject, p.From, p.InReplyTo}, p.References...) {
			if strings.ContainsAny(s, "\r\n") {
				t.Fatalf("header-bound value %q has a line break", s)
			}
		}
		for _, a := range p.Attachments {
			if strings.ContainsAny(a.Filename, "\r\n") {
				t.Fatalf("attachment filename %q has a line break", a.Filename)
			}
		}
	})
}

// BenchmarkParseLarge measures a message near the inbound size limit.
func BenchmarkParseLarge(b *testing.B) {
	o := Outgoing{From: "a@x.test", To: []string{"b@y.test"}, Subject: "big", Text: strings.Repeat("text line\n", 10000),
		HTML: strings.Repeat("<p>html line</p>\n", 10000), MessageID: "<big@x.test>",
		Attachments: []Attachment{{Filename: "big.bin", ContentType: "application/octet-stream", Content: bytes.Repeat(byteRange(0, 256), 18<<12)}}}
	raw, err := Compose(o)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// parseDate tries the common form first; wherever net/mail can parse a date, both give
// the same instant and zone offset.
func TestParseDateAgreesWithNetMail(t *testing.T) {
	for _, v := range []string{
		"Sun, 22 Nov 2026 03:05:53 +0000",
		"Mon, 2 Jan 2006 15:04:05 -0700",
		"Tue, 09 Dec 2025 23:59:60 +0100", // a leap second: both refuse or both accept
		"Wed, 1 Jan 2025 00:00:00 +1345",
		"Thu, 20 Nov 1997 09:55:06 MDT",
		"Fri, 21 Nov 1997 09:55:06 -0600 (MDT)",
		"21 Nov 97 09:55:06 GMT",
		"Sat, 31 Feb 2026 10:00:00 +0000", // no such day
		"Mon, 22 Nov 2026 03:05:53 +0000", // wrong day of the week
	} {
		want, werr := netmail.ParseDate(v)
		got := parseDate(v)
		if werr != nil {
			continue // parseDate then tries its own repairs
		}
		_, wantOff := want.Zone()
		_, gotOff := got.Zone()
		qt.Check(t, got.Equal(want) && wantOff == gotOff, qt.IsTrue, qt.Commentf("%q: %v, net/mail %v", v, got, want))
	}
}

// TestParseTriageHeaders checks that the header fields triage reads reach it from a bulk
// message, whatever their case, unfolded and cut to their bound, and no others.
func TestParseTriageHeaders(t *testing.T) {
	c := qt.New(t)
	raw := "From: Deals <news@shop.example>\r\nTo: me@example.test\r\nSubject: 40% off\r\n" +
		"LIST-UNSUBSCRIBE: <https://shop.example/u/1>,\r\n <mailto:u@shop.example>\r\n" +
		"Precedence: bulk\r\nX-Mailer: MailBlast 4.2\r\nFeedback-ID: 1:2:shop\r\nX-Other: ignored\r\n" +
		"List-Id: " + strings.Repeat("x", 300) + "\r\n\r\nBig sale.\r\n"
	p, err := Parse([]byte(raw))
	c.Assert(err, qt.IsNil)
	c.Assert(p.TriageHeaders, qt.DeepEquals, map[string]string{
		"List-Unsubscribe": "<https://shop.example/u/1>, <mailto:u@shop.example>",
		"Precedence":       "bulk",
		"X-Mailer":         "MailBlast 4.2",
		"Feedback-Id":      "1:2:shop",
		"List-Id":          strings.Repeat("x", db.TriageHeaderChars),
	})
}
