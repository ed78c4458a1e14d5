package protect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func ruleNames(rules []db.SpamRule) []string {
	out := []string{}
	for _, r := range rules {
		out = append(out, r.Name)
	}
	return out
}

func TestBuiltinSpamRules(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		body    string
		score   float64
		rules   []string
		held    bool
	}{{
		name: "ordinary mail", subject: "Lunch on Friday?", body: "Shall we try the new place at noon?",
		score: 0, rules: []string{},
	}, {
		name: "prize scam", subject: "WINNER!!! CLAIM YOUR PRIZE", body: "Congratulations you have won $1,000,000 in our lottery. Act now: http://192.0.2.9/claim",
		score: 10.5, rules: []string{"SPAM_PHRASE", "SPAM_PHRASES_MANY", "SUBJECT_ALL_CAPS", "SUBJECT_EXCLAIM", "MONEY_AMOUNT", "URL_IP_ADDRESS"}, held: true,
	}, {
		name: "one phrase is not enough", subject: "Work from home policy", body: "HR has updated the policy, see https://bit.ly/abc",
		score: 3.5, rules: []string{"SPAM_PHRASE", "URL_SHORTENER"},
	}, {
		name: "GTUBE", subject: "test", body: "This is the GTUBE, the\n" + GTUBE + "\n",
		score: 1000, rules: []string{"GTUBE"}, held: true,
	}}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			s := newScanner(t, Config{})
			v := scan(t, s, message("x@sender.example", test.subject, test.body), goodIP, "mx", "x@sender.example")
			qt.Assert(t, v.Protection.Spam, qt.Equals, db.Spam{Score: test.score, Threshold: 6})
			qt.Assert(t, ruleNames(v.Detail.SpamRules), qt.DeepEquals, test.rules)
			qt.Assert(t, v.Detail.SpamEngine, qt.Equals, "builtin")
			qt.Assert(t, v.Quarantined(), qt.Equals, test.held)
			if test.held {
				qt.Assert(t, v.Protection.Reasons, qt.DeepEquals, []string{ReasonSpam})
			}
		})
	}
}

func TestSpamRulesOfHeadersAndAttachments(t *testing.T) {
	c := qt.New(t)
	s := newScanner(t, Config{})
	v, err := s.Scan(context.Background(), Input{
		Raw:         []byte("To: a@inboxd.test\r\nSubject: hi\r\n\r\nhello\r\n"),
		Subject:     "hi",
		Text:        "hello",
		Attachments: []File{{Filename: "invoice.pdf.EXE", ContentType: "application/octet-stream", Content: []byte("MZ")}},
	})
	c.Assert(err, qt.IsNil)
	c.Assert(ruleNames(v.Detail.SpamRules), qt.DeepEquals, []string{"EXECUTABLE_ATTACHMENT", "MISSING_FROM", "MISSING_DATE", "MISSING_MESSAGE_ID"})
	c.Assert(v.Protection.Spam.Score, qt.Equals, 4.5)
}

// The rule table is documented: every rule has a unique name, positive points and a
// description, and docs/protection.md lists each with its points.
func TestRuleTableIsDocumented(t *testing.T) {
	c := qt.New(t)
	readme, err := os.ReadFile("../../docs/protection.md")
	c.Assert(err, qt.IsNil)
	seen := map[string]bool{}
	for _, r := range Rules {
		c.Assert(seen[r.Name], qt.IsFalse, qt.Commentf("duplicate rule %s", r.Name))
		seen[r.Name] = true
		c.Assert(r.Score > 0, qt.IsTrue)
		c.Assert(r.Description, qt.Not(qt.Equals), "")
		row := regexp.MustCompile("(?m)^\\| `" + r.Name + "` \\| " + regexp.QuoteMeta(strconv.FormatFloat(r.Score, 'f', -1, 64)) + " \\|")
		c.Assert(row.Match(readme), qt.IsTrue, qt.Commentf("docs/protection.md has no row | `%s` | %v | ...", r.Name, r.Score))
	}
}

// fakeSpamd answers the SPAMD protocol on loopback: reply builds the answer from the
// request body. It stops with the test.
func fakeSpamd(t *testing.T, reply func(body []byte) string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				req, err := r.ReadString('\n')
				if err != nil || !strings.HasPrefix(req, "REPORT SPAMC/") {
					fmt.Fprintf(conn, "SPAMD/1.0 76 Bad header line: %s\r\n", strings.TrimSpace(req))
					return
				}
				n := -1
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					line = strings.TrimSpace(line)
					if line == "" {
						break
					}
					if v, ok := strings.CutPrefix(strings.ToLower(line), "content-length:"); ok {
						n, _ = strconv.Atoi(strings.TrimSpace(v))
					}
				}
				body := make([]byte, max(n, 0))
				if _, err := io.ReadFull(r, body); err != nil {
					return
				}
				io.WriteString(conn, reply(body))
			}()
		}
	}()
	return ln.Addr().String()
}

// spamdReport is a REPORT answer as SpamAssassin 4 writes it.
func spamdReport(spam bool, score float64, rules string) string {
	body := "Spam detection software, running on the system \"test\",\nhas identified this incoming email as possible spam.\n\n" +
		"Content analysis details:   (" + strconv.FormatFloat(score, 'f', 1, 64) + " points, 5.0 required)\n\n" +
		" pts rule name              description\n" +
		"---- ---------------------- --------------------------------------------------\n" + rules + "\n"
	flag := "False"
	if spam {
		flag = "True"
	}
	return fmt.Sprintf("SPAMD/1.1 0 EX_OK\r\nContent-length: %d\r\nSpam: %s ; %.1f / 5.0\r\n\r\n%s", len(body), flag, score, body)
}

func TestSpamdClient(t *testing.T) {
	c := qt.New(t)
	addr := fakeSpamd(t, func(body []byte) string {
		if strings.Contains(string(body), GTUBE) {
			return spamdReport(true, 1002.7, " 2.7 MISSING_DATE           Missing Date: header\n1000 GTUBE                  BODY: Generic Test for Unsolicited Bulk Email\n-0.0 NO_RELAYS              Informational: message was not relayed via\n                            SMTP")
		}
		if strings.Contains(string(body), "borderline") {
			return spamdReport(true, 5.4, " 5.4 BORDERLINE             A local rule at the spamd's own threshold")
		}
		return spamdReport(false, 0.1, " 0.1 MISSING_MID            Missing Message-Id: header")
	})
	s := newScanner(t, Config{Spamd: addr})

	v := scan(t, s, message("x@sender.example", "test", GTUBE), "", "", "")
	c.Assert(v.Detail.SpamEngine, qt.Equals, "spamd")
	c.Assert(v.Protection.Spam, qt.Equals, db.Spam{Score: 1002.7, Threshold: 6})
	c.Assert(v.Detail.SpamRules, qt.DeepEquals, []db.SpamRule{
		{Name: "MISSING_DATE", Score: 2.7, Description: "Missing Date: header"},
		{Name: "GTUBE", Score: 1000, Description: "BODY: Generic Test for Unsolicited Bulk Email"},
		{Name: "NO_RELAYS", Score: 0, Description: "Informational: message was not relayed via SMTP"},
	})
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonSpam})

	v = scan(t, s, message("x@sender.example", "hello", "an ordinary note"), "", "", "")
	c.Assert(v.Protection.Spam.Score, qt.Equals, 0.1)
	c.Assert(v.Quarantined(), qt.IsFalse)

	// spamd's own verdict counts even under our threshold (API-NOTES section 9).
	v = scan(t, s, message("x@sender.example", "hello", "borderline"), "", "", "")
	c.Assert(v.Protection.Spam.Score, qt.Equals, 5.4)
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonSpam})
	c.Assert(v.Detail.SpamdRequired, qt.Equals, 5.0)
}

// A configured spamd that is down, silent or confused gives no verdict: the scan fails with
// ErrUnavailable (the SMTP layer answers 451), never a silent clean.
func TestSpamdUnavailable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // holds the connection open, says nothing
		}
	}()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	down := closed.Addr().String()
	closed.Close()
	for name, addr := range map[string]string{
		"down":      down,
		"silent":    silent.Addr().String(),
		"not spamd": fakeSpamd(t, func([]byte) string { return "HTTP/1.1 400 Bad Request\r\n\r\n" }),
		"error":     fakeSpamd(t, func([]byte) string { return "SPAMD/1.1 74 EX_TEMPFAIL\r\n\r\n" }),
		"no header": fakeSpamd(t, func([]byte) string { return "SPAMD/1.1 0 EX_OK\r\n\r\n" }),
	} {
		t.Run(name, func(t *testing.T) {
			s := newScanner(t, Config{Spamd: addr, ScannerTimeout: 500 * time.Millisecond})
			start := time.Now()
			_, err := s.Scan(context.Background(), Input{Raw: message("a@b.example", "hi", "hello")})
			qt.Assert(t, errors.Is(err, ErrUnavailable), qt.IsTrue, qt.Commentf("%v", err))
			qt.Assert(t, time.Since(start) < 3*time.Second, qt.IsTrue)
		})
	}
}

// TestRealSpamd talks to SpamAssassin's spamd, started on loopback by scripts/test.sh
// (INBOXD_TEST_SPAMD=HOST:PORT). Without it the test is skipped, except in CI.
func TestRealSpamd(t *testing.T) {
	addr := os.Getenv("INBOXD_TEST_SPAMD")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("INBOXD_TEST_SPAMD is not set: scripts/test.sh starts spamd (Debian's spamd package) and sets it")
		}
		t.Skip("INBOXD_TEST_SPAMD is not set (scripts/test.sh starts a real spamd)")
	}
	c := qt.New(t)
	s := newScanner(t, Config{Spamd: addr, ScannerTimeout: 60 * time.Second})
	v := scan(t, s, message("x@sender.example", "test", "This is the GTUBE, the\n"+GTUBE+"\n"), "", "", "")
	c.Assert(v.Protection.Spam.Score >= 1000, qt.IsTrue, qt.Commentf("%+v", v.Protection.Spam))
	c.Assert(ruleNames(v.Detail.SpamRules), qt.Contains, "GTUBE")
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonSpam})

	v = scan(t, s, message("colleague@sender.example", "Lunch on Friday?", "Shall we try the new place at noon? Cheers, Sam"), "", "", "")
	c.Assert(v.Protection.Spam.Score < 6, qt.IsTrue, qt.Commentf("%+v %+v", v.Protection.Spam, v.Detail.SpamRules))
	c.Assert(v.Quarantined(), qt.IsFalse)
}

// countPhrases finds what looking for each phrase in turn finds, wherever in the text.
func TestCountPhrases(t *testing.T) {
	c := qt.New(t)
	c.Assert(len(spamPhrases) <= 64, qt.IsTrue)
	slow := func(lower string) int {
		n := 0
		for _, p := range spamPhrases {
			if strings.Contains(lower, p) {
				n++
			}
		}
		return n
	}
	texts := []string{"", "a", "you have won", "xyou have wonx lottery lottery", "cialisviagra", "risk-free risk free 100% free",
		"dear beneficiary, congratulations you have an inheritance", "nothing to see here", "act no", "act now"}
	for _, p := range spamPhrases {
		texts = append(texts, p, "x"+p, p[:len(p)-1], strings.Repeat(p, 2))
	}
	for _, s := range texts {
		c.Check(countPhrases(s), qt.Equals, slow(s), qt.Commentf("%q", s))
	}
}

func TestCollapseSpace(t *testing.T) {
	c := qt.New(t)
	for _, k := range [][2]string{{"", ""}, {"a", ""}, {"", "b"}, {"  Hello  world ", "\r\n body\ttext\u00a0nbsp\u2003em  "},
		{"Subject", "line one\r\nline two\r\n\r\n"}, {"\u3000", "\u3000x\u3000"}, {"bad \xff utf8", "x\xffy z"}} {
		want := strings.Join(strings.Fields(k[0]+"\n"+k[1]), " ")
		c.Check(collapseSpace(k[0], k[1]), qt.Equals, want, qt.Commentf("%q", k))
	}
}

// collapseSpace and countPhrases against their definitions, on random text made of the
// pieces that matter: white space of every kind, invalid bytes, and parts of phrases.
func TestSpamTextRandom(t *testing.T) {
	c := qt.New(t)
	pieces := []string{" ", "\t", "\r\n", "\u00a0", "\u2003", "\u3000", "\x85", "\xc2", "\xff", "a", "you", " have ", "won", "lot", "tery",
		"risk", "-free", "100%", " free", "é", "$", "€", "cialis", "act now", "x"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var a, b strings.Builder
		for range rng.IntN(12) {
			a.WriteString(pieces[rng.IntN(len(pieces))])
		}
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		want := strings.Join(strings.Fields(a.String()+"\n"+b.String()), " ")
		got := collapseSpace(a.String(), b.String())
		c.Assert(got, qt.Equals, want, qt.Commentf("%q %q", a.String(), b.String()))
		n := 0
		for _, p := range spamPhrases {
			if strings.Contains(got, p) {
				n++
			}
		}
		c.Assert(countPhrases(got), qt.Equals, n, qt.Commentf("%q", got))
	}
}
