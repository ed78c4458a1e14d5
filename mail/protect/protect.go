// Package protect computes the protection verdict of received mail (spec 2.5, API-NOTES
// section 9): who sent it (SPF, DKIM, DMARC), how spammy it is (a built-in rule table or
// SpamAssassin's spamd), and whether it carries malware (built-in EICAR detection, also
// inside zip archives, and ClamAV's clamd), and from those whether it is quarantined.
package protect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
)

// ErrUnavailable wraps the failure of a configured scanner (spamd or clamd down, timed
// out, answering nonsense). The message has no honest verdict: the SMTP layer answers
// 451 and the sender retries, and local delivery retries later. Never a silent clean.
var ErrUnavailable = errors.New("protect: a configured scanner is unavailable")

// Config configures a Scanner. The zero value scans with the built-in spam rules and
// antivirus and no DNS (authentication results unavailable).
type Config struct {
	// Resolver answers the SPF, DKIM and DMARC DNS queries; nil turns them off.
	Resolver Resolver
	// Spamd is HOST:PORT of a SpamAssassin spamd; empty uses the built-in rules.
	Spamd string
	// Clamd is unix:PATH or tcp:HOST:PORT of a ClamAV clamd; empty uses only the
	// built-in antivirus.
	Clamd string
	// Threshold is the spam score that quarantines (default 6).
	Threshold float64
	// MaxDKIMSignatures bounds the signatures verified per message (default 10).
	MaxDKIMSignatures int
	// QueryTimeout bounds each DNS query (default 3 s); AuthTimeout all of a message's
	// authentication (default 10 s); ScannerTimeout one spamd or clamd exchange (30 s).
	QueryTimeout, AuthTimeout, ScannerTimeout time.Duration
	// DNSCacheTTL is how long DNS answers are reused across messages (default
	// DefaultDNSCacheTTL); negative reuses none.
	DNSCacheTTL time.Duration
	// Now is the clock of scannedAt; nil means time.Now.
	Now func() time.Time
}

// Scanner computes verdicts. It is safe for concurrent use.
type Scanner struct {
	resolver     Resolver
	spamd        *spamd
	clamd        *clamd
	threshold    float64
	maxSigs      int
	queryTimeout time.Duration
	authTimeout  time.Duration
	now          func() time.Time
	dnsCache     *dnsCache
}

// New checks cfg and returns a Scanner.
func New(cfg Config) (*Scanner, error) {
	s := &Scanner{
		resolver:     cfg.Resolver,
		threshold:    cfg.Threshold,
		maxSigs:      cfg.MaxDKIMSignatures,
		queryTimeout: cfg.QueryTimeout,
		authTimeout:  cfg.AuthTimeout,
		now:          cfg.Now,
		dnsCache:     newDNSCache(cfg.DNSCacheTTL),
	}
	if s.threshold <= 0 {
		s.threshold = DefaultThreshold
	}
	if s.maxSigs <= 0 {
		s.maxSigs = DefaultMaxDKIMSignatures
	}
	if s.queryTimeout <= 0 {
		s.queryTimeout = defaultQueryTimeout
	}
	if s.authTimeout <= 0 {
		s.authTimeout = 10 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	timeout := cfg.ScannerTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if cfg.Spamd != "" {
		if h, p, err := net.SplitHostPort(cfg.Spamd); err != nil || h == "" || p == "" {
			return nil, fmt.Errorf("spamd address %q: want HOST:PORT", cfg.Spamd)
		}
		s.spamd = &spamd{addr: cfg.Spamd, timeout: timeout}
	}
	if cfg.Clamd != "" {
		c, err := parseClamd(cfg.Clamd)
		if err != nil {
			return nil, err
		}
		c.timeout = timeout
		s.clamd = c
	}
	return s, nil
}

// Input is one received message and where it came from.
type Input struct {
	// Raw is the message as the client sent it (DKIM verifies these bytes).
	Raw []byte
	// RemoteIP is the connecting SMTP client; nil when unknown (SPF is then unavailable).
	RemoteIP net.IP
	// Helo is the name the client gave in HELO/EHLO.
	Helo string
	// MailFrom is the envelope sender; "" for the null sender <>.
	MailFrom string
	// Internal is true for mail sent by an inbox of this server: its authentication is
	// pass by construction (the API key vouched for the sender).
	Internal bool

	// The parsed content the spam rules and the antivirus look at.
	Subject     string
	Text, HTML  string
	Attachments []File
}

// File is one attachment.
type File struct {
	Filename    string
	ContentType string
	Content     []byte
}

// Verdict is the outcome of a scan: the protection object clients see, and the detail
// behind it that the review dashboard shows.
type Verdict struct {
	Protection db.Protection
	Detail     db.ProtectionDetail
}

// Quarantined reports whether the verdict holds the message for review.
func (v *Verdict) Quarantined() bool { return v.Protection.Status == db.ProtectionQuarantined }

// Reasons of a quarantine (API-NOTES section 9), in the order they are listed.
const (
	ReasonMalware        = "malware"
	ReasonSpam           = "spam"
	ReasonAuthentication = "authentication_failed"
	ReasonScanIncomplete = "scan_incomplete"
)

// Antivirus statuses.
const (
	AVClean       = "clean"
	AVInfected    = "infected"
	AVUnscannable = "unscannable"
)

const maxSignatures = 20

// Inconsistency is a field of a verdict that contradicts the rest of it, by the name the
// verdict's JSON gives it.
type Inconsistency struct{ Field, Reason string }

// Inconsistencies checks a verdict whose fields are each valid against the consistency
// rules of API-NOTES section 9: quarantined exactly when there are reasons, infected
// exactly with malware, unscannable exactly with scan_incomplete, and a release recorded
// only on a released message. A verdict of the scan has none; one a test chooses (a
// fixture, injected mail) is refused with them, as the service could not have given it.
func Inconsistencies(p *db.Protection) []Inconsistency {
	var out []Inconsistency
	if quarantined := p.Status == db.ProtectionQuarantined; quarantined != (len(p.Reasons) > 0) {
		reason := "must be empty unless status is quarantined"
		if quarantined {
			reason = "a quarantined message needs at least one reason"
		}
		out = append(out, Inconsistency{"reasons", reason})
	}
	if (p.Antivirus.Status == AVInfected) != slices.Contains(p.Reasons, ReasonMalware) {
		out = append(out, Inconsistency{"reasons", "must contain malware exactly when antivirus.status is infected"})
	}
	if (p.Antivirus.Status == AVUnscannable) != slices.Contains(p.Reasons, ReasonScanIncomplete) {
		out = append(out, Inconsistency{"reasons", "must contain scan_incomplete exactly when antivirus.status is unscannable"})
	}
	if p.Status != db.ProtectionReleased {
		for _, f := range []struct{ name, value string }{{"releasedAt", p.ReleasedAt}, {"releasedBy", p.ReleasedBy}} {
			if f.value != "" {
				out = append(out, Inconsistency{f.name, "only a released message has it"})
			}
		}
	}
	return out
}

// Scan computes the verdict of one message. Authentication never fails (DNS trouble is
// temperror); the only error is ErrUnavailable, when a configured spamd or clamd cannot
// give an answer.
func (s *Scanner) Scan(ctx context.Context, in Input) (*Verdict, error) {
	h := parseHeader(in.Raw)
	v := &Verdict{}
	d := &v.Detail
	d.IgnoredAuthResults = len(h.all("Authentication-Results")) + len(h.all("ARC-Authentication-Results"))

	// The antivirus runs beside the authentication, which mostly waits on DNS.
	type avOut struct {
		av  db.Antivirus
		err error
	}
	avc := make(chan avOut, 1)
	go func() {
		av, err := s.antivirus(ctx, &in, d)
		avc <- avOut{av, err}
	}()
	auth := s.authenticate(ctx, in, h, d)
	spam, spamVerdict, err := s.spam(ctx, &in, h, auth, d)
	avr := <-avc
	if err == nil {
		err = avr.err
	}
	if err != nil {
		return nil, err
	}

	p := &v.Protection
	p.ScannedAt = db.Time{Time: s.now().UTC()}.String()
	p.Authentication = auth
	p.Spam = spam
	p.Antivirus = avr.av
	p.Reasons = Reasons(auth, spam, spamVerdict, avr.av)
	p.Status = db.ProtectionClean
	if len(p.Reasons) > 0 {
		p.Status = db.ProtectionQuarantined
	}
	return v, nil
}

// Reasons applies the quarantine rules of API-NOTES section 9. spamVerdict is true when
// the spam filter itself called the message spam (spamd at its own required score).
func Reasons(auth db.Authentication, spam db.Spam, spamVerdict bool, av db.Antivirus) []string {
	reasons := []string{}
	if av.Status == AVInfected {
		reasons = append(reasons, ReasonMalware)
	}
	if spam.Score >= spam.Threshold || spamVerdict {
		reasons = append(reasons, ReasonSpam)
	}
	if auth.DMARC == Fail || (auth.SPF == Fail && auth.DKIM != Pass && auth.DMARC != Pass) {
		reasons = append(reasons, ReasonAuthentication)
	}
	if av.Status == AVUnscannable {
		reasons = append(reasons, ReasonScanIncomplete)
	}
	return reasons
}

// spam scores the message with spamd when configured, else with the built-in rules.
func (s *Scanner) spam(ctx context.Context, in *Input, h header, auth db.Authentication, d *db.ProtectionDetail) (db.Spam, bool, error) {
	out := db.Spam{Threshold: s.threshold}
	if s.spamd == nil {
		d.SpamEngine = "builtin"
		out.Score, d.SpamRules = scoreBuiltin(in, h, auth)
		return out, false, nil
	}
	d.SpamEngine = "spamd"
	res, err := s.spamd.check(ctx, in.Raw)
	if err != nil {
		return out, false, fmt.Errorf("%w: spamd at %s: %v", ErrUnavailable, s.spamd.addr, err)
	}
	out.Score, d.SpamRules = res.score, res.rules
	d.SpamdRequired = res.required
	return out, res.spam, nil
}

// antivirus runs the built-in scanner and, when configured, clamd on the whole message.
func (s *Scanner) antivirus(ctx context.Context, in *Input, d *db.ProtectionDetail) (db.Antivirus, error) {
	r := scanBuiltin(in)
	d.AVEngine = "builtin"
	if s.clamd != nil {
		d.AVEngine = "builtin+clamd"
		cv, err := s.clamd.scan(ctx, in.Raw)
		if err != nil {
			return db.Antivirus{}, fmt.Errorf("%w: clamd at %s:%s: %v", ErrUnavailable, s.clamd.network, s.clamd.addr, err)
		}
		for _, sig := range cv.signatures {
			r.infected(sig)
		}
		if cv.errText != "" {
			r.unscannable = append(r.unscannable, "clamd: "+cv.errText)
		}
	}
	av := db.Antivirus{Status: AVClean, Signatures: []string{}}
	for _, sig := range r.signatures {
		if len(av.Signatures) < maxSignatures {
			av.Signatures = append(av.Signatures, clip(sig, 1000))
		}
	}
	d.AVNotes = r.unscannable
	switch {
	case len(av.Signatures) > 0:
		av.Status = AVInfected
	case len(r.unscannable) > 0:
		av.Status = AVUnscannable
	}
	return av, nil
}

// Describe is a one-line summary of a verdict for logs.
func (v *Verdict) Describe() string {
	p := v.Protection
	return fmt.Sprintf("%s spf=%s dkim=%s dmarc=%s spam=%.1f/%.1f av=%s reasons=%s", p.Status, p.Authentication.SPF,
		p.Authentication.DKIM, p.Authentication.DMARC, p.Spam.Score, p.Spam.Threshold, p.Antivirus.Status, strings.Join(p.Reasons, ","))
}
