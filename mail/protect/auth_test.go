package protect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/inboxd/inboxd/db"
)

const (
	goodIP = "192.0.2.1"    // listed in example.org's SPF record
	badIP  = "198.51.100.7" // listed nowhere
)

// world is example.org with SPF (-all), DMARC p=reject and a DKIM key, in a fake DNS.
type world struct {
	dns *fakeDNS
	key *dkimKey
	s   *Scanner
}

func newWorld(t *testing.T) *world {
	dns := newFakeDNS()
	dns.txt["example.org"] = []string{"v=spf1 ip4:" + goodIP + " -all"}
	dns.txt["_dmarc.example.org"] = []string{"v=DMARC1; p=reject"}
	w := &world{dns: dns, key: newDKIMKey(t, dns, "example.org", "sel1")}
	w.s = newScanner(t, Config{Resolver: dns, QueryTimeout: 300 * time.Millisecond})
	return w
}

func auth(v *Verdict) [3]string {
	a := v.Protection.Authentication
	return [3]string{a.SPF, a.DKIM, a.DMARC}
}

func TestAuthenticatedMailIsClean(t *testing.T) {
	c := qt.New(t)
	w := newWorld(t)
	raw := w.key.sign(t, message("Alice <alice@example.org>", "Quarterly numbers", "See you Monday."))
	v := scan(t, w.s, raw, goodIP, "mail.example.org", "alice@example.org")
	c.Assert(auth(v), qt.Equals, [3]string{Pass, Pass, Pass})
	c.Assert(v.Protection.Authentication.SigningDomains, qt.DeepEquals, []string{"example.org"})
	c.Assert(v.Protection.Status, qt.Equals, db.ProtectionClean)
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{})
	c.Assert(v.Detail.DMARC.Policy, qt.Equals, "reject")
}

// A forger on another server claims example.org and adds its own Authentication-Results
// saying everything passed: the header is ignored, and the message is held.
func TestForgedAuthenticationResultsAreIgnored(t *testing.T) {
	c := qt.New(t)
	w := newWorld(t)
	raw := message("CEO <ceo@example.org>", "Urgent wire", "Please pay the attached invoice today.",
		"Authentication-Results: mx.inboxd.test; spf=pass smtp.mailfrom=example.org; dkim=pass header.d=example.org; dmarc=pass",
		"ARC-Authentication-Results: i=1; mx.inboxd.test; dmarc=pass")
	v := scan(t, w.s, raw, badIP, "forger.example", "ceo@example.org")
	c.Assert(auth(v), qt.Equals, [3]string{Fail, None, Fail})
	c.Assert(v.Protection.Status, qt.Equals, db.ProtectionQuarantined)
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonAuthentication})
	c.Assert(v.Detail.IgnoredAuthResults, qt.Equals, 2)
}

func TestDKIMResults(t *testing.T) {
	tests := []struct {
		name  string
		setup func(w *world)
		mail  func(t *testing.T, w *world) []byte
		want  string
	}{{
		name: "none without a signature",
		mail: func(t *testing.T, w *world) []byte { return message("a@example.org", "Plain", "hi") },
		want: None,
	}, {
		name: "fail when the body was changed after signing",
		mail: func(t *testing.T, w *world) []byte {
			return bytes.Replace(w.key.sign(t, message("a@example.org", "Invoice", "Pay 10 EUR")), []byte("10 EUR"), []byte("9000 EUR"), 1)
		},
		want: Fail,
	}, {
		name:  "temperror when the key cannot be fetched now",
		setup: func(w *world) { w.dns.fail["sel1._domainkey.example.org"] = errors.New("i/o timeout") },
		mail:  func(t *testing.T, w *world) []byte { return w.key.sign(t, message("a@example.org", "Hello", "hi")) },
		want:  TempError,
	}, {
		name: "permerror when the key record is malformed",
		setup: func(w *world) {
			w.dns.txt["sel1._domainkey.example.org"] = []string{"v=DKIM1; k=ed25519; p=!!not-base64!!"}
		},
		mail: func(t *testing.T, w *world) []byte { return w.key.sign(t, message("a@example.org", "Hello", "hi")) },
		want: PermError,
	}, {
		name:  "permerror when the key does not exist",
		setup: func(w *world) { delete(w.dns.txt, "sel1._domainkey.example.org") },
		mail:  func(t *testing.T, w *world) []byte { return w.key.sign(t, message("a@example.org", "Hello", "hi")) },
		want:  PermError,
	}, {
		name: "pass when one of two signatures verifies",
		mail: func(t *testing.T, w *world) []byte {
			other := newDKIMKey(t, w.dns, "example.org", "sel2")
			delete(w.dns.txt, "sel2._domainkey.example.org")
			return w.key.sign(t, other.sign(t, message("a@example.org", "Hello", "hi")))
		},
		want: Pass,
	}}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			w := newWorld(t)
			if test.setup != nil {
				test.setup(w)
			}
			v := scan(t, w.s, test.mail(t, w), goodIP, "mail.example.org", "a@example.org")
			qt.Assert(t, v.Protection.Authentication.DKIM, qt.Equals, test.want, qt.Commentf("%+v", v.Detail.DKIM))
			// SPF passed for the From domain, so DMARC passes and nothing is held.
			qt.Assert(t, v.Protection.Authentication.DMARC, qt.Equals, Pass)
			qt.Assert(t, v.Protection.Status, qt.Equals, db.ProtectionClean)
		})
	}
}

func TestSPFResults(t *testing.T) {
	tests := []struct {
		name   string
		record []string
		fail   error
		hang   bool
		ip     string
		want   string
	}{
		{name: "pass", record: []string{"v=spf1 ip4:192.0.2.0/24 -all"}, ip: goodIP, want: Pass},
		{name: "fail", record: []string{"v=spf1 ip4:192.0.2.0/24 -all"}, ip: badIP, want: Fail},
		{name: "softfail makes no assertion", record: []string{"v=spf1 ip4:192.0.2.0/24 ~all"}, ip: badIP, want: None},
		{name: "none without a record", ip: badIP, want: None},
		{name: "permerror with two records", record: []string{"v=spf1 -all", "v=spf1 +all"}, ip: goodIP, want: PermError},
		{name: "permerror with a broken record", record: []string{"v=spf1 ip4:not-an-address -all"}, ip: goodIP, want: PermError},
		{name: "temperror when DNS fails", fail: errors.New("server misbehaving"), ip: goodIP, want: TempError},
		{name: "temperror when DNS does not answer", hang: true, ip: goodIP, want: TempError},
		{name: "unavailable without the client IP", record: []string{"v=spf1 -all"}, want: Unavailable},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			dns := newFakeDNS()
			if test.record != nil {
				dns.txt["sender.example"] = test.record
			}
			if test.fail != nil {
				dns.fail["sender.example"] = test.fail
			}
			dns.hang["sender.example"] = test.hang
			s := newScanner(t, Config{Resolver: dns, QueryTimeout: 200 * time.Millisecond})
			start := time.Now()
			v := scan(t, s, message("x@sender.example", "Hi", "hello"), test.ip, "mx.sender.example", "x@sender.example")
			qt.Assert(t, v.Protection.Authentication.SPF, qt.Equals, test.want, qt.Commentf("%+v", v.Detail.SPF))
			qt.Assert(t, time.Since(start) < 3*time.Second, qt.IsTrue)
		})
	}
}

// The null sender (bounces) is checked against the HELO name.
func TestSPFNullSenderUsesHelo(t *testing.T) {
	dns := newFakeDNS()
	dns.txt["mx.sender.example"] = []string{"v=spf1 ip4:" + goodIP + " -all"}
	s := newScanner(t, Config{Resolver: dns})
	v := scan(t, s, message("mailer-daemon@sender.example", "Undelivered", "sorry"), goodIP, "mx.sender.example", "")
	qt.Assert(t, v.Protection.Authentication.SPF, qt.Equals, Pass)
	qt.Assert(t, v.Detail.SPF.Domain, qt.Equals, "mx.sender.example")
}

func TestDMARCResults(t *testing.T) {
	tests := []struct {
		name  string
		setup func(w *world)
		from  string
		extra []string
		ip    string
		sign  bool
		want  string
		held  bool
	}{
		{name: "pass through aligned DKIM alone", from: "a@example.org", ip: badIP, sign: true, want: Pass},
		{name: "fail when nothing aligned passed", from: "a@example.org", ip: badIP, want: Fail, held: true},
		{name: "none without a policy", from: "a@nopolicy.example", ip: goodIP, want: None},
		{name: "temperror when the policy lookup fails", from: "a@example.org", ip: badIP,
			setup: func(w *world) { w.dns.fail["_dmarc.example.org"] = errors.New("connection refused") }, want: TempError, held: true},
		{name: "permerror for a malformed policy", from: "a@example.org", ip: badIP,
			setup: func(w *world) { w.dns.txt["_dmarc.example.org"] = []string{"v=DMARC1; p=bogus"} }, want: PermError, held: true},
		{name: "permerror for two From addresses", from: "a@example.org, b@other.example", ip: goodIP, want: PermError},
		{name: "permerror for two From fields", from: "a@example.org", extra: []string{"From: b@other.example"}, ip: goodIP, want: PermError},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			w := newWorld(t)
			if test.setup != nil {
				test.setup(w)
			}
			raw := message(test.from, "Hello", "hi", test.extra...)
			if test.sign {
				raw = w.key.sign(t, raw)
			}
			v := scan(t, w.s, raw, test.ip, "mx.example.org", "a@example.org")
			qt.Assert(t, v.Protection.Authentication.DMARC, qt.Equals, test.want, qt.Commentf("%+v", v.Detail.DMARC))
			qt.Assert(t, v.Quarantined(), qt.Equals, test.held, qt.Commentf("%s", v.Describe()))
		})
	}
}

// Relaxed alignment accepts a subdomain of the same organizational domain; strict
// (adkim=s) wants the exact domain. The organizational domain follows the public suffix
// list, so example.co.uk is the organization of shop.example.co.uk.
func TestDMARCAlignment(t *testing.T) {
	c := qt.New(t)
	dns := newFakeDNS()
	sub := newDKIMKey(t, dns, "mail.example.co.uk", "s1")
	s := newScanner(t, Config{Resolver: dns})

	dns.txt["_dmarc.example.co.uk"] = []string{"v=DMARC1; p=quarantine"}
	v := scan(t, s, sub.sign(t, message("news@shop.example.co.uk", "News", "hi")), badIP, "mx", "bounce@esp.example")
	c.Assert(auth(v), qt.Equals, [3]string{None, Pass, Pass})
	c.Assert(v.Detail.DMARC.Policy, qt.Equals, "quarantine") // found at the organizational domain
	c.Assert(v.Protection.Authentication.SigningDomains, qt.DeepEquals, []string{"mail.example.co.uk"})

	dns.txt["_dmarc.example.co.uk"] = []string{"v=DMARC1; p=quarantine; adkim=s"}
	v = scan(t, newScanner(t, Config{Resolver: dns}), sub.sign(t, message("news@shop.example.co.uk", "News", "hi")), badIP, "mx", "bounce@esp.example")
	c.Assert(auth(v), qt.Equals, [3]string{None, Pass, Fail})
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonAuthentication})

	// A public suffix is never an organization: co.uk aligns with nothing.
	c.Assert(aligned("a.co.uk", "b.co.uk", "r"), qt.IsFalse)
	c.Assert(aligned("Mail.Example.ORG.", "example.org", "r"), qt.IsTrue)
}

// SPF fail alone holds a message only when neither DKIM nor DMARC passed.
func TestSPFFailRule(t *testing.T) {
	c := qt.New(t)
	dns := newFakeDNS()
	dns.txt["sender.example"] = []string{"v=spf1 ip4:" + goodIP + " -all"}
	thirdParty := newDKIMKey(t, dns, "esp.example", "k")
	s := newScanner(t, Config{Resolver: dns})

	v := scan(t, s, message("x@sender.example", "Hi", "hello"), badIP, "mx", "x@sender.example")
	c.Assert(auth(v), qt.Equals, [3]string{Fail, None, None})
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonAuthentication})

	v = scan(t, s, thirdParty.sign(t, message("x@sender.example", "Hi", "hello")), badIP, "mx", "x@sender.example")
	c.Assert(auth(v), qt.Equals, [3]string{Fail, Pass, None})
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{})
}

func TestAuthenticationUnavailable(t *testing.T) {
	c := qt.New(t)
	s := newScanner(t, Config{}) // --dns off
	v := scan(t, s, message("a@example.org", "Hi", "hello"), goodIP, "mx", "a@example.org")
	c.Assert(auth(v), qt.Equals, [3]string{Unavailable, Unavailable, Unavailable})
	c.Assert(v.Protection.Status, qt.Equals, db.ProtectionClean)
}

func TestInternalMailPassesByConstruction(t *testing.T) {
	c := qt.New(t)
	dns := newFakeDNS()
	s := newScanner(t, Config{Resolver: dns})
	v, err := s.Scan(context.Background(), Input{Raw: message("bot@inboxd.test", "Hi", "hello"), Internal: true, Text: "hello"})
	c.Assert(err, qt.IsNil)
	checkConsistent(t, v.Protection)
	c.Assert(auth(v), qt.Equals, [3]string{Pass, Pass, Pass})
	c.Assert(v.Detail.Internal, qt.IsTrue)
	c.Assert(dns.count(), qt.Equals, 0)
}

// A sender may add any number of DKIM signatures; only the first ten are verified, so a
// hundred cost ten key lookups, not a hundred.
func TestHundredDKIMSignaturesBoundedWork(t *testing.T) {
	c := qt.New(t)
	w := newWorld(t)
	signed := w.key.sign(t, message("a@example.org", "Many signatures", "hi"))
	sig := signed[:bytes.Index(signed, []byte("\r\nFrom:"))+2]
	var extra bytes.Buffer
	for i := range 99 {
		// Each a different selector: a distinct key lookup if it were verified.
		extra.Write(bytes.Replace(sig, []byte("s=sel1"), fmt.Appendf(nil, "s=bogus%d", i), 1))
	}
	raw := append(extra.Bytes(), signed...)
	c.Assert(bytes.Count(raw, []byte("DKIM-Signature:")), qt.Equals, 100)
	start := time.Now()
	v := scan(t, w.s, raw, badIP, "mx", "a@example.org")
	c.Assert(time.Since(start) < 5*time.Second, qt.IsTrue)
	c.Assert(v.Detail.DKIMSkipped, qt.Equals, 90)
	c.Assert(len(v.Detail.DKIM), qt.Equals, 10)
	c.Assert(v.Protection.Authentication.DKIM, qt.Equals, PermError) // the valid one was not among the first ten
	c.Assert(w.dns.count() <= 14, qt.IsTrue, qt.Commentf("%d queries", w.dns.count()))
}

// A DNS server that answers garbage, or the right id with a truncated body, or nothing at
// all: every check ends as temperror within the query timeout, nothing panics.
func TestMalformedDNSAnswers(t *testing.T) {
	for _, mode := range []string{"garbage", "truncated", "silent", "bad-txt"} {
		t.Run(mode, func(t *testing.T) {
			c := qt.New(t)
			addr := fakeDNSServer(t, mode)
			r, err := ServerResolver(addr)
			c.Assert(err, qt.IsNil)
			key := newDKIMKey(t, newFakeDNS(), "example.org", "sel1")
			s := newScanner(t, Config{Resolver: r, QueryTimeout: 300 * time.Millisecond, AuthTimeout: 2 * time.Second})
			start := time.Now()
			v := scan(t, s, key.sign(t, message("a@example.org", "Hi", "hello")), goodIP, "mx", "a@example.org")
			c.Assert(time.Since(start) < 4*time.Second, qt.IsTrue)
			if mode == "bad-txt" {
				// Well-formed DNS carrying nonsense records.
				c.Assert(auth(v), qt.Equals, [3]string{PermError, PermError, PermError}, qt.Commentf("%+v", v.Detail))
				return
			}
			c.Assert(auth(v), qt.Equals, [3]string{TempError, TempError, TempError}, qt.Commentf("%+v", v.Detail))
			c.Assert(v.Quarantined(), qt.IsFalse)
		})
	}
}

// fakeDNSServer answers UDP DNS queries on loopback according to mode, until the test ends.
func fakeDNSServer(t *testing.T, mode string) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			var out []byte
			switch mode {
			case "garbage":
				out = []byte{byte(h.ID >> 8), byte(h.ID), 0x81, 0x80, 0xff, 0xff, 0xde, 0xad, 0xbe, 0xef}
			case "truncated":
				out = answer(h, q, "v=spf1 -all")
				out = out[:len(out)-5]
			case "silent":
				continue
			case "bad-txt":
				txt := "v=spf1 ip4:999.1.1.1 -all"
				switch {
				case strings.HasPrefix(q.Name.String(), "_dmarc."):
					txt = "v=DMARC1; p=sometimes"
				case strings.Contains(q.Name.String(), "_domainkey."):
					txt = "v=DKIM1; k=ed25519; p=%%%"
				}
				out = answer(h, q, txt)
			}
			pc.WriteTo(out, from)
		}
	}()
	return pc.LocalAddr().String()
}

func answer(h dnsmessage.Header, q dnsmessage.Question, txt string) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionAvailable: true})
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeTXT {
		b.TXTResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.TXTResource{TXT: []string{txt}})
	}
	out, _ := b.Finish()
	return out
}

func TestServerResolverAddress(t *testing.T) {
	_, err := ServerResolver("127.0.0.1")
	qt.Assert(t, err, qt.ErrorMatches, `.*HOST:PORT`)
	_, err = ServerResolver("127.0.0.1:53")
	qt.Assert(t, err, qt.IsNil)
}

// The guard turns every DNS failure but "not found" into a temporary one, and stops after
// its budget.
func TestGuardNormalisesAndBounds(t *testing.T) {
	c := qt.New(t)
	dns := newFakeDNS()
	dns.fail["perm.example"] = &net.DNSError{Err: "refused", Name: "perm.example"}
	g := newGuard(dns, time.Second)
	ctx := context.Background()
	_, err := g.LookupTXT(ctx, "perm.example")
	var de *net.DNSError
	c.Assert(errors.As(err, &de), qt.IsTrue)
	c.Assert(de.IsTemporary, qt.IsTrue)
	_, err = g.LookupTXT(ctx, "missing.example")
	c.Assert(errors.As(err, &de), qt.IsTrue)
	c.Assert(de.IsNotFound, qt.IsTrue)
	for i := range maxQueriesPerScan {
		g.LookupTXT(ctx, fmt.Sprintf("n%d.example", i))
	}
	before := dns.count()
	_, err = g.LookupTXT(ctx, "one-more.example")
	c.Assert(err, qt.ErrorMatches, ".*budget.*")
	c.Assert(dns.count(), qt.Equals, before)
	dns.txt["big.example"] = []string{strings.Repeat("x", maxTXTBytes+1)}
	_, err = g.LookupTXT(context.Background(), "big.example")
	c.Assert(err, qt.Not(qt.IsNil))
}
