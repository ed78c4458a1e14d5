package protect

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// fakeDNS is a Resolver over maps. A name in fail answers with that error; a name in
// hang blocks until the query's context ends; any other unknown name is "not found".
type fakeDNS struct {
	mu      sync.Mutex
	txt     map[string][]string
	ips     map[string][]net.IPAddr
	mx      map[string][]*net.MX
	fail    map[string]error
	hang    map[string]bool
	queries int
}

func newFakeDNS() *fakeDNS {
	return &fakeDNS{txt: map[string][]string{}, ips: map[string][]net.IPAddr{}, mx: map[string][]*net.MX{},
		fail: map[string]error{}, hang: map[string]bool{}}
}

func (f *fakeDNS) answer(ctx context.Context, name string) (bool, error) {
	f.mu.Lock()
	f.queries++
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	err, failing := f.fail[name]
	hang := f.hang[name]
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return false, ctx.Err()
	}
	if failing {
		return false, err
	}
	return true, nil
}

func notFound(name string) error {
	return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

func (f *fakeDNS) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if ok, err := f.answer(ctx, name); !ok {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.txt[strings.ToLower(strings.TrimSuffix(name, "."))]; ok {
		return v, nil
	}
	return nil, notFound(name)
}

func (f *fakeDNS) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	if ok, err := f.answer(ctx, name); !ok {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.mx[name]; ok {
		return v, nil
	}
	return nil, notFound(name)
}

func (f *fakeDNS) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	if ok, err := f.answer(ctx, host); !ok {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.ips[host]; ok {
		return v, nil
	}
	return nil, notFound(host)
}

func (f *fakeDNS) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	if ok, err := f.answer(ctx, addr); !ok {
		return nil, err
	}
	return nil, notFound(addr)
}

func (f *fakeDNS) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queries
}

// dkimKey is a signing key of a domain and selector, published in a fakeDNS.
type dkimKey struct {
	domain, selector string
	priv             ed25519.PrivateKey
}

func newDKIMKey(t *testing.T, dns *fakeDNS, domain, selector string) *dkimKey {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	qt.Assert(t, err, qt.IsNil)
	dns.txt[selector+"._domainkey."+domain] = []string{"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)}
	return &dkimKey{domain: domain, selector: selector, priv: priv}
}

func (k *dkimKey) sign(t *testing.T, raw []byte) []byte {
	var out bytes.Buffer
	err := dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{Domain: k.domain, Selector: k.selector, Signer: k.priv,
		HeaderKeys: []string{"From", "To", "Subject", "Date", "Message-ID"}})
	qt.Assert(t, err, qt.IsNil)
	return out.Bytes()
}

// message builds a plain-text RFC 5322 message.
func message(from, subject, body string, extra ...string) []byte {
	var b strings.Builder
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("From: " + from + "\r\nTo: someone@inboxd.test\r\nSubject: " + subject +
		"\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\nMessage-ID: <" + strings.ReplaceAll(subject, " ", ".") + "@example>\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n")
	return []byte(b.String())
}

// scan runs a scanner over a message from ip, with the text as subject and body.
func scan(t *testing.T, s *Scanner, raw []byte, ip, helo, mailFrom string) *Verdict {
	t.Helper()
	in := Input{Raw: raw, Helo: helo, MailFrom: mailFrom, Text: string(raw[bytes.Index(raw, []byte("\r\n\r\n"))+4:])}
	if ip != "" {
		in.RemoteIP = net.ParseIP(ip)
	}
	h := parseHeader(raw)
	if s := h.all("Subject"); len(s) > 0 {
		in.Subject = s[0]
	}
	v, err := s.Scan(context.Background(), in)
	qt.Assert(t, err, qt.IsNil)
	checkConsistent(t, v.Protection)
	return v
}

// checkConsistent asserts the consistency rules of API-NOTES section 9 and the spec's
// shape limits on every verdict a test sees.
func checkConsistent(t *testing.T, p db.Protection) {
	t.Helper()
	c := qt.New(t)
	has := func(r string) bool {
		for _, x := range p.Reasons {
			if x == r {
				return true
			}
		}
		return false
	}
	c.Assert(p.Status == db.ProtectionQuarantined, qt.Equals, len(p.Reasons) > 0, qt.Commentf("%+v", p))
	c.Assert(p.Antivirus.Status == AVInfected, qt.Equals, has(ReasonMalware), qt.Commentf("%+v", p))
	c.Assert(p.Antivirus.Status == AVUnscannable, qt.Equals, has(ReasonScanIncomplete), qt.Commentf("%+v", p))
	c.Assert(len(p.Reasons) <= 4, qt.IsTrue)
	c.Assert(p.Spam.Threshold > 0, qt.IsTrue)
	c.Assert(p.Authentication.SigningDomains, qt.Not(qt.IsNil))
	c.Assert(len(p.Authentication.SigningDomains) <= 20, qt.IsTrue)
	for _, d := range p.Authentication.SigningDomains {
		c.Assert(domainPattern.MatchString(d), qt.IsTrue, qt.Commentf("signing domain %q", d))
	}
	c.Assert(p.Antivirus.Signatures, qt.Not(qt.IsNil))
	c.Assert(len(p.Antivirus.Signatures) <= 20, qt.IsTrue)
	_, err := time.Parse(time.RFC3339, p.ScannedAt)
	c.Assert(err, qt.IsNil)
	for _, r := range []string{p.Authentication.SPF, p.Authentication.DKIM, p.Authentication.DMARC} {
		c.Assert(r, qt.Matches, "pass|fail|none|temperror|permerror|unavailable")
	}
}

func newScanner(t *testing.T, cfg Config) *Scanner {
	t.Helper()
	s, err := New(cfg)
	qt.Assert(t, err, qt.IsNil)
	return s
}

func dbAuth(spf, dkim, dmarc string) db.Authentication {
	return db.Authentication{SPF: spf, DKIM: dkim, DMARC: dmarc, SigningDomains: []string{}}
}

func dbSpam(score float64) db.Spam { return db.Spam{Score: score, Threshold: DefaultThreshold} }

func dbAV(status string) db.Antivirus { return db.Antivirus{Status: status, Signatures: []string{}} }
