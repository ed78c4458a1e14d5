package protect

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/mail"
	"regexp"
	"sort"
	"strings"

	"blitiri.com.ar/go/spf"
	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-msgauth/dmarc"
	"golang.org/x/net/publicsuffix"

	"github.com/inboxd/inboxd/db"
)

// Authentication results (spec 2.5), each of SPF, DKIM and DMARC.
const (
	Pass        = "pass"
	Fail        = "fail"
	None        = "none"
	TempError   = "temperror"
	PermError   = "permerror"
	Unavailable = "unavailable"
)

// DefaultMaxDKIMSignatures bounds the signatures verified on one message: each costs a
// DNS query and a pass over the body, and a sender can add as many as it likes.
const DefaultMaxDKIMSignatures = 10

// maxSigningDomains is the spec's limit on authentication.signingDomains.
const maxSigningDomains = 20

var domainPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$`)

// header is the top of a message as a list of unfolded fields; parsing it ourselves keeps
// a malformed line from hiding the fields that follow it.
type header []field

type field struct{ name, value string }

func parseHeader(raw []byte) header {
	end := len(raw)
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		end = i
	}
	if i := bytes.Index(raw[:end], []byte("\n\n")); i >= 0 {
		end = i
	}
	var h header
	// The last field's value, line by line, joined when the field ends: appending each
	// continuation line to the value made a field folded over n lines cost n^2.
	var value []string
	finish := func() {
		if len(value) > 0 {
			h[len(h)-1].value = strings.Join(value, " ")
			value = value[:0]
		}
	}
	// Line by line over one copy of the header: values are substrings of it. (Making the
	// line ends LF first and splitting copied it twice more for every message.)
	for rest := string(raw[:end]); rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		if (line[0] == ' ' || line[0] == '\t') && len(h) > 0 {
			value = append(value, strings.TrimSpace(line))
			continue
		}
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		finish()
		h = append(h, field{name: strings.TrimSpace(name)})
		value = append(value, strings.TrimSpace(v))
	}
	finish()
	return h
}

func (h header) all(name string) []string {
	var out []string
	for _, f := range h {
		if strings.EqualFold(f.name, name) {
			out = append(out, f.value)
		}
	}
	return out
}

func (h header) has(name string) bool { return len(h.all(name)) > 0 }

// fromDomain is the RFC5322.From domain DMARC evaluates. A message with no From, several
// From fields or several addresses in it has no single author domain: DMARC cannot be
// evaluated (permerror), and a sender cannot pick which address is checked.
func fromDomain(h header) (string, string) {
	froms := h.all("From")
	if len(froms) != 1 {
		return "", "the message must have exactly one From field"
	}
	addrs, err := mail.ParseAddressList(froms[0])
	if err != nil || len(addrs) != 1 {
		return "", "the From field must hold exactly one address"
	}
	at := strings.LastIndexByte(addrs[0].Address, '@')
	if at < 0 {
		return "", "the From address has no domain"
	}
	d := strings.TrimSuffix(strings.ToLower(addrs[0].Address[at+1:]), ".")
	if d == "" {
		return "", "the From address has no domain"
	}
	return d, ""
}

// orgDomain is the organizational domain (RFC 7489 section 3.2): the registrable domain
// by the public suffix list.
func orgDomain(d string) string {
	o, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return o
}

func aligned(a, b string, mode dmarc.AlignmentMode) bool {
	a, b = strings.ToLower(strings.TrimSuffix(a, ".")), strings.ToLower(strings.TrimSuffix(b, "."))
	if mode == dmarc.AlignmentStrict {
		return a == b
	}
	return orgDomain(a) == orgDomain(b)
}

// authenticate runs SPF, DKIM and DMARC. It never fails: DNS trouble is temperror.
func (s *Scanner) authenticate(ctx context.Context, in Input, h header, d *db.ProtectionDetail) db.Authentication {
	a := db.Authentication{SigningDomains: []string{}}
	if in.Internal {
		// Mail from an inbox of this server was authenticated by its API key.
		a.SPF, a.DKIM, a.DMARC = Pass, Pass, Pass
		d.Internal = true
		d.SPF = db.AuthDetail{Result: Pass, Note: "sent by an inbox of this server"}
		d.DMARC = db.AuthDetail{Result: Pass, Note: "sent by an inbox of this server"}
		return a
	}
	if s.resolver == nil {
		a.SPF, a.DKIM, a.DMARC = Unavailable, Unavailable, Unavailable
		note := "DNS checks are turned off on this server (--dns off)"
		d.SPF = db.AuthDetail{Result: Unavailable, Note: note}
		d.DMARC = db.AuthDetail{Result: Unavailable, Note: note}
		return a
	}
	ctx, cancel := context.WithTimeout(ctx, s.authTimeout)
	defer cancel()
	g := newGuard(s.resolver, s.queryTimeout)
	g.shared = s.dnsCache

	spfResult, spfDomain := s.checkSPF(ctx, g, in, d)
	a.SPF = spfResult

	passed := s.checkDKIM(ctx, g, in.Raw, h, d)
	a.DKIM = d.DKIMResult
	seen := map[string]bool{}
	for _, dom := range passed {
		dom = strings.TrimSuffix(strings.ToLower(dom), ".")
		if seen[dom] || len(dom) > 253 || !domainPattern.MatchString(dom) || len(a.SigningDomains) >= maxSigningDomains {
			continue
		}
		seen[dom] = true
		a.SigningDomains = append(a.SigningDomains, dom)
	}
	sort.Strings(a.SigningDomains)

	a.DMARC = s.checkDMARC(ctx, g, h, spfResult, spfDomain, passed, d)
	return a
}

// checkSPF evaluates the connecting IP against the MAIL FROM domain (the HELO name for the
// null sender). softfail and neutral make no assertion the spec's enum can carry: they are
// reported as none (the detail keeps the original word).
func (s *Scanner) checkSPF(ctx context.Context, g *guard, in Input, d *db.ProtectionDetail) (string, string) {
	domain := in.Helo
	if at := strings.LastIndexByte(in.MailFrom, '@'); at >= 0 {
		domain = in.MailFrom[at+1:]
	}
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	d.SPF.Domain = domain
	if in.RemoteIP == nil {
		d.SPF.Result, d.SPF.Note = Unavailable, "the connecting IP address is not known"
		return Unavailable, domain
	}
	if domain == "" {
		d.SPF.Result, d.SPF.Note = None, "no MAIL FROM or HELO domain to check"
		return None, domain
	}
	sender := in.MailFrom
	if sender == "" {
		sender = "postmaster@" + domain
	}
	res, err := spf.CheckHostWithSender(in.RemoteIP, in.Helo, sender,
		spf.WithResolver(g), spf.WithContext(ctx))
	d.SPF.Result = string(res)
	if err != nil && res != spf.Pass && !errors.Is(err, spf.ErrNoResult) {
		d.SPF.Note = clip(err.Error(), 300)
	}
	switch res {
	case spf.Pass:
		return Pass, domain
	case spf.Fail:
		return Fail, domain
	case spf.TempError:
		return TempError, domain
	case spf.PermError:
		return PermError, domain
	}
	return None, domain // none, neutral, softfail
}

// checkDKIM verifies every DKIM signature (the first MaxDKIMSignatures of them) and returns
// the d= domains of those that verify. The combined result is pass when one verifies, else
// temperror when one could not be checked for now, else fail when one is wrong, else
// permerror (every signature malformed or its key unusable), and none without signatures.
func (s *Scanner) checkDKIM(ctx context.Context, g *guard, raw []byte, h header, d *db.ProtectionDetail) []string {
	n := len(h.all("DKIM-Signature"))
	if n == 0 {
		d.DKIMResult = None
		return nil
	}
	if n > s.maxSigs {
		d.DKIMSkipped = n - s.maxSigs
	}
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT:        g.txtFunc(ctx),
		MaxVerifications: s.maxSigs,
	})
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		// An unexpected failure: no verification of this call can be trusted.
		d.DKIMResult = PermError
		d.DKIM = append(d.DKIM, db.DKIMDetail{Result: PermError, Note: clip(err.Error(), 300)})
		return nil
	}
	var passed []string
	has := map[string]bool{}
	for _, v := range verifs {
		r := Pass
		note := ""
		switch {
		case v.Err == nil:
			passed = append(passed, v.Domain)
		case dkim.IsTempFail(v.Err):
			r, note = TempError, v.Err.Error()
		case dkim.IsPermFail(v.Err):
			r, note = PermError, v.Err.Error()
		default:
			r, note = Fail, v.Err.Error()
		}
		has[r] = true
		d.DKIM = append(d.DKIM, db.DKIMDetail{Domain: clip(strings.ToLower(v.Domain), 253), Result: r, Note: clip(note, 300)})
	}
	for _, r := range []string{Pass, TempError, Fail, PermError} {
		if has[r] {
			d.DKIMResult = r
			return passed
		}
	}
	d.DKIMResult = PermError
	return passed
}

// checkDMARC looks up the policy of the From domain (falling back to its organizational
// domain) and passes when SPF or a DKIM signature passed for an aligned domain.
func (s *Scanner) checkDMARC(ctx context.Context, g *guard, h header, spfResult, spfDomain string, dkimDomains []string, d *db.ProtectionDetail) string {
	from, why := fromDomain(h)
	d.DMARC.Domain = from
	if from == "" {
		d.DMARC.Result, d.DMARC.Note = PermError, why
		return PermError
	}
	opts := &dmarc.LookupOptions{LookupTXT: g.txtFunc(ctx)}
	rec, err := dmarc.LookupWithOptions(from, opts)
	if errors.Is(err, dmarc.ErrNoPolicy) {
		if org := orgDomain(from); org != from {
			rec, err = dmarc.LookupWithOptions(org, opts)
		}
	}
	switch {
	case errors.Is(err, dmarc.ErrNoPolicy):
		d.DMARC.Result, d.DMARC.Note = None, "the From domain publishes no DMARC policy"
		return None
	case dmarc.IsTempFail(err):
		d.DMARC.Result, d.DMARC.Note = TempError, clip(err.Error(), 300)
		return TempError
	case err != nil:
		d.DMARC.Result, d.DMARC.Note = PermError, clip(err.Error(), 300)
		return PermError
	}
	d.DMARC.Policy = string(rec.Policy)
	if spfResult == Pass && aligned(spfDomain, from, rec.SPFAlignment) {
		d.DMARC.Result, d.DMARC.Note = Pass, "SPF passed for an aligned domain ("+spfDomain+")"
		return Pass
	}
	for _, dom := range dkimDomains {
		if aligned(dom, from, rec.DKIMAlignment) {
			d.DMARC.Result, d.DMARC.Note = Pass, "DKIM passed for an aligned domain ("+strings.ToLower(dom)+")"
			return Pass
		}
	}
	d.DMARC.Result, d.DMARC.Note = Fail, "neither SPF nor DKIM passed for a domain aligned with "+from
	return Fail
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string { return db.ClipBytes(s, n) }

var _ spf.DNSResolver = (*guard)(nil)
var _ Resolver = (*net.Resolver)(nil)
