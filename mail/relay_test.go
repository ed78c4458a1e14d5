package mail_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/triage"
)

// fakeRelay is an in-process SMTP server standing in for the operator's relay. Answer
// decides the reply to each RCPT and end of data.
type fakeRelay struct {
	addr string
	srv  *smtp.Server

	mu       sync.Mutex
	answer   func(rcpt string) error // nil: accept
	atData   func(rcpt string) error // nil: accept
	got      []relayed
	authUser string
	authPass string
	authed   []string
}

type relayed struct {
	from, to string
	data     []byte
	size     int64 // as announced in MAIL FROM
}

func newFakeRelay(t *testing.T) *fakeRelay {
	t.Helper()
	f := &fakeRelay{}
	f.srv = smtp.NewServer(f)
	f.srv.Domain = "relay.test"
	f.srv.AllowInsecureAuth = true
	f.srv.EnableSMTPUTF8 = true
	f.srv.ErrorLog = silentLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	f.addr = ln.Addr().String()
	go f.srv.Serve(ln)
	t.Cleanup(func() { f.srv.Close() })
	return f
}

type silentLog struct{}

func (silentLog) Printf(string, ...any) {}
func (silentLog) Println(...any)        {}

func (f *fakeRelay) NewSession(*smtp.Conn) (smtp.Session, error) { return &relaySession{f: f}, nil }

func (f *fakeRelay) messages() []relayed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]relayed(nil), f.got...)
}

type relaySession struct {
	f        *fakeRelay
	from, to string
	size     int64 // MAIL FROM SIZE=
}

func (s *relaySession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *relaySession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.f.mu.Lock()
		defer s.f.mu.Unlock()
		if user != s.f.authUser || pass != s.f.authPass {
			return errors.New("bad credentials")
		}
		s.f.authed = append(s.f.authed, user)
		return nil
	}), nil
}

func (s *relaySession) Reset()        {}
func (s *relaySession) Logout() error { return nil }

func (s *relaySession) Mail(from string, opts *smtp.MailOptions) error {
	if opts != nil {
		s.size = opts.Size
	}
	if s.f.authUser != "" {
		s.f.mu.Lock()
		n := len(s.f.authed)
		s.f.mu.Unlock()
		if n == 0 {
			return smtp.ErrAuthRequired
		}
	}
	s.from = from
	return nil
}

func (s *relaySession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.f.mu.Lock()
	answer := s.f.answer
	s.f.mu.Unlock()
	if answer != nil {
		if err := answer(to); err != nil {
			return err
		}
	}
	s.to = to
	return nil
}

func (s *relaySession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.f.mu.Lock()
	atData := s.f.atData
	s.f.mu.Unlock()
	if atData != nil {
		if err := atData(s.to); err != nil {
			return err
		}
	}
	s.f.mu.Lock()
	s.f.got = append(s.f.got, relayed{from: s.from, to: s.to, data: b, size: s.size})
	s.f.mu.Unlock()
	return nil
}

// outEnv is a mail service sending through a relay, with the account "acme" and its
// inbox agent@inboxd.test.
type outEnv struct {
	t     *testing.T
	store db.Store
	svc   *mail.Service
	inbox *db.Inbox
}

func newOutEnv(t *testing.T, cfg mail.OutboundConfig, configure ...func(*mail.Config)) *outEnv {
	t.Helper()
	c := qt.New(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "inboxd.db"), sqlite.Options{})
	c.Assert(err, qt.IsNil)
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, store, db.NewInbox{AccountID: "acme", Address: "agent@inboxd.test", DisplayName: "Agent", DefaultDomain: "inboxd.test"})
	c.Assert(err, qt.IsNil)
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	if cfg.RetryBase == 0 {
		cfg.RetryBase = 20 * time.Millisecond
	}
	mc := mail.Config{Store: store, Domain: "inboxd.test", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Outbound: cfg}
	for _, f := range configure {
		f(&mc)
	}
	svc := mail.NewService(mc)
	workCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { svc.RunOutbound(workCtx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		store.Close()
	})
	return &outEnv{t: t, store: store, svc: svc, inbox: in}
}

func (e *outEnv) send(key string, to ...string) db.SendResult {
	e.t.Helper()
	res, err := e.svc.Send(context.Background(), e.inbox, mail.Draft{To: to, Subject: "Hello " + key, Text: "Body of " + key, IdempotencyKey: key})
	qt.Assert(e.t, err, qt.IsNil)
	return res
}

// waitDelivery polls the delivery record until every recipient's status passes done.
func (e *outEnv) waitDelivery(id string, done func(r db.RecipientDelivery) bool) *db.Delivery {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := e.store.GetMessage(context.Background(), e.inbox.ID, id)
		qt.Assert(e.t, err, qt.IsNil)
		all := true
		for _, r := range m.Delivery.Recipients {
			all = all && done(r)
		}
		if all {
			return m.Delivery
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("delivery of %s not settled: %+v", id, m.Delivery)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *outEnv) labels(id string) []string {
	m, err := e.store.GetMessage(context.Background(), e.inbox.ID, id)
	qt.Assert(e.t, err, qt.IsNil)
	return m.Labels
}

func terminal(r db.RecipientDelivery) bool { return db.Terminal(r.Status) }

func relayFor(t *testing.T, f *fakeRelay, url string) *mail.Relay {
	t.Helper()
	if url == "" {
		url = "smtp://" + f.addr
	}
	r, err := mail.ParseRelay(url, "inboxd.test")
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRelayDelivers hands mail for the outside world to the relay, with credentials, and
// keeps local recipients local.
func TestRelayDelivers(t *testing.T) {
	c := qt.New(t)
	f := newFakeRelay(t)
	f.authUser, f.authPass = "user@inboxd.test", "p@ss:word/1"
	e := newOutEnv(t, mail.OutboundConfig{Transport: relayFor(t, f, "smtp://user%40inboxd.test:p%40ss%3Aword%2F1@"+f.addr)})
	res := e.send("k1", "ann@customer.example", "Bob@Other.Example", "agent@inboxd.test")
	d := e.waitDelivery(res.MessageID, terminal)
	c.Assert(d.Recipients, qt.HasLen, 3)
	for _, r := range d.Recipients {
		want := mail.ProviderRelay
		if r.Recipient == "agent@inboxd.test" {
			want = mail.ProviderLocal
		}
		c.Check(r.Status, qt.Equals, db.RecipientDelivered, qt.Commentf("%+v", r))
		c.Check(r.Provider, qt.Equals, want)
		c.Check(r.SMTPStatusCode, qt.Equals, "250")
		c.Check(r.Delivered, qt.IsTrue)
	}
	c.Check(d.Version, qt.Equals, 4) // 1 at send, +1 per recipient outcome

	got := f.messages()
	c.Assert(got, qt.HasLen, 2)
	rcpts := []string{got[0].to, got[1].to}
	c.Check(rcpts, qt.ContentEquals, []string{"ann@customer.example", "bob@other.example"})
	for _, g := range got {
		c.Check(g.from, qt.Equals, "agent@inboxd.test")
		c.Check(string(g.data), qt.Contains, "Message-ID: "+res.MessageID)
		c.Check(string(g.data), qt.Contains, "From: Agent <agent@inboxd.test>")
		c.Check(string(g.data), qt.Not(qt.Contains), "Bcc:")
		c.Check(g.size, qt.Equals, int64(len(g.data))) // SIZE= is the message as sent
	}
	c.Check(f.authed, qt.Not(qt.HasLen), 0)
}

// TestRelayTemporaryFailureRetries shows deferred with the relay's codes, then delivers
// once the relay accepts again.
func TestRelayTemporaryFailureRetries(t *testing.T) {
	c := qt.New(t)
	f := newFakeRelay(t)
	var mu sync.Mutex
	tries := 0
	f.answer = func(string) error {
		mu.Lock()
		defer mu.Unlock()
		tries++
		if tries <= 2 {
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Greylisted, try again later"}
		}
		return nil
	}
	var logged syncBuffer
	e := newOutEnv(t, mail.OutboundConfig{Transport: relayFor(t, f, ""), RetryBase: 150 * time.Millisecond},
		func(c *mail.Config) { c.Log = slog.New(slog.NewTextHandler(&logged, nil)) })
	res := e.send("k1", "ann@customer.example")
	d := e.waitDelivery(res.MessageID, func(r db.RecipientDelivery) bool { return r.Status == db.RecipientDeferred })
	c.Check(d.Recipients[0].SMTPStatusCode, qt.Equals, "451")
	c.Check(d.Recipients[0].SMTPEnhancedStatusCode, qt.Equals, "4.7.1")
	c.Check(d.Recipients[0].Reason, qt.Equals, "Greylisted, try again later")
	c.Check(d.Recipients[0].Delivered, qt.IsFalse)

	d = e.waitDelivery(res.MessageID, terminal)
	c.Check(d.Recipients[0].Status, qt.Equals, db.RecipientDelivered)
	c.Check(d.Version, qt.Equals, 4) // queued, deferred, deferred, delivered
	c.Check(f.messages(), qt.HasLen, 1)
	c.Check(e.labels(res.MessageID), qt.DeepEquals, []string{"sent"})
	// The operator sees the deferrals in the log.
	c.Check(logged.String(), qt.Matches, `(?s).*level=WARN msg="outbound: not delivered.*recipient=ann@customer.example provider=relay code=451 reason="Greylisted, try again later".*`)
}

// syncBuffer is a bytes.Buffer safe for the outbound workers' concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRelayGivesUp records failed once a deferred recipient waited too long.
func TestRelayGivesUp(t *testing.T) {
	c := qt.New(t)
	f := newFakeRelay(t)
	f.answer = func(string) error {
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Busy"}
	}
	e := newOutEnv(t, mail.OutboundConfig{Transport: relayFor(t, f, ""), GiveUpAfter: 200 * time.Millisecond})
	res := e.send("k1", "ann@customer.example")
	d := e.waitDelivery(res.MessageID, terminal)
	c.Check(d.Recipients[0].Status, qt.Equals, db.RecipientFailed)
	c.Check(d.Recipients[0].Reason, qt.Matches, "gave up after 200ms of retries; last error: Busy")
}

// TestRelayHardBounceSuppresses records a 5xx as bounced with its codes, labels the sent
// message, and suppresses the address for the inbox's later sends.
func TestRelayHardBounceSuppresses(t *testing.T) {
	c := qt.New(t)
	f := newFakeRelay(t)
	f.answer = func(rcpt string) error {
		if strings.HasPrefix(rcpt, "gone@") {
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user"}
		}
		return nil
	}
	f.atData = func(rcpt string) error {
		if strings.HasPrefix(rcpt, "spamcheck@") {
			return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Message rejected as spam"}
		}
		return nil
	}
	e := newOutEnv(t, mail.OutboundConfig{Transport: relayFor(t, f, "")})
	res := e.send("k1", "gone@customer.example", "ok@customer.example", "spamcheck@customer.example")
	d := e.waitDelivery(res.MessageID, terminal)
	byRcpt := map[string]db.RecipientDelivery{}
	for _, r := range d.Recipients {
		byRcpt[r.Recipient] = r
	}
	c.Check(byRcpt["gone@customer.example"].Status, qt.Equals, db.RecipientBounced)
	c.Check(byRcpt["gone@customer.example"].SMTPStatusCode, qt.Equals, "550")
	c.Check(byRcpt["gone@customer.example"].SMTPEnhancedStatusCode, qt.Equals, "5.1.1")
	c.Check(byRcpt["gone@customer.example"].Reason, qt.Equals, "No such user")
	c.Check(byRcpt["ok@customer.example"].Status, qt.Equals, db.RecipientDelivered)
	c.Check(byRcpt["spamcheck@customer.example"].Status, qt.Equals, db.RecipientBounced)
	c.Check(byRcpt["spamcheck@customer.example"].SMTPEnhancedStatusCode, qt.Equals, "5.7.1")
	c.Check(e.labels(res.MessageID), qt.DeepEquals, []string{"bounced", "sent"})

	// Only the address that does not exist is suppressed; a content refusal is not.
	sup, err := e.store.Suppressions(context.Background(), e.inbox.ID)
	c.Assert(err, qt.IsNil)
	c.Assert(sup, qt.HasLen, 1)
	c.Check(sup[0].Address, qt.Equals, "gone@customer.example")
	c.Check(sup[0].SMTPEnhanced, qt.Equals, "5.1.1")

	res2 := e.send("k2", "Gone@customer.example", "ok@customer.example")
	d2 := e.waitDelivery(res2.MessageID, terminal)
	c.Check(d2.Recipients[0], qt.DeepEquals, db.RecipientDelivery{Recipient: "gone@customer.example", Status: db.RecipientRejected,
		UpdatedAt: d2.SentAt, Reason: "Recipient is suppressed"})
	c.Check(d2.Recipients[1].Status, qt.Equals, db.RecipientDelivered)
	c.Check(e.labels(res2.MessageID), qt.DeepEquals, []string{"bounced", "sent"})
	n := 0
	for _, g := range f.messages() {
		if g.to == "gone@customer.example" {
			n++
		}
	}
	c.Check(n, qt.Equals, 0) // never handed to the relay
}

// TestLocalUnknownRecipientSuppresses treats a local address without an inbox as a hard
// bounce too.
func TestLocalUnknownRecipientSuppresses(t *testing.T) {
	c := qt.New(t)
	e := newOutEnv(t, mail.OutboundConfig{})
	res := e.send("k1", "nobody@inboxd.test", "far@away.example")
	d := e.waitDelivery(res.MessageID, terminal)
	c.Check(d.Recipients[0].Status, qt.Equals, db.RecipientBounced)
	c.Check(d.Recipients[0].SMTPEnhancedStatusCode, qt.Equals, "5.1.1")
	c.Check(d.Recipients[1].Status, qt.Equals, db.RecipientDelivered)
	c.Check(d.Recipients[1].Provider, qt.Equals, mail.ProviderSink) // no relay: the test-double sink
	sup, err := e.store.Suppressions(context.Background(), e.inbox.ID)
	c.Assert(err, qt.IsNil)
	c.Check(sup, qt.HasLen, 1)
}

// TestLocalDeliveryTriagedBeforeStore: mail sent to another inbox of this server goes
// through the same receive rules as SMTP mail, so with a provider that answers at once it
// arrives triaged.
func TestLocalDeliveryTriagedBeforeStore(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	model, err := triage.NewBuiltin()
	c.Assert(err, qt.IsNil)
	e := newOutEnv(t, mail.OutboundConfig{}, func(c *mail.Config) { c.TriageNow = model.Result })
	desk, err := db.CreateInbox(ctx, e.store, db.NewInbox{AccountID: "acme", Address: "desk@inboxd.test", DefaultDomain: "inboxd.test"})
	c.Assert(err, qt.IsNil)
	res := e.send("k1", "desk@inboxd.test")
	e.waitDelivery(res.MessageID, terminal)
	m, err := e.store.GetMessage(ctx, desk.ID, res.MessageID)
	c.Assert(err, qt.IsNil)
	c.Assert(m.Triage, qt.IsNotNil)
	c.Assert(m.Triage.Status, qt.Equals, db.TriageComplete)
	c.Assert(m.Triage.Model, qt.Equals, model.Model())
}

// TestRelayDKIM signs relayed mail so that a verifier with the published key accepts it.
func TestRelayDKIM(t *testing.T) {
	for _, kind := range []string{"rsa", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			c := qt.New(t)
			keyFile := filepath.Join(t.TempDir(), "dkim.pem")
			var der []byte
			var err error
			if kind == "rsa" {
				k, _ := rsa.GenerateKey(rand.Reader, 2048)
				der = x509.MarshalPKCS1PrivateKey(k)
				c.Assert(os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600), qt.IsNil)
			} else {
				_, k, _ := ed25519.GenerateKey(rand.Reader)
				der, err = x509.MarshalPKCS8PrivateKey(k)
				c.Assert(err, qt.IsNil)
				c.Assert(os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600), qt.IsNil)
			}
			signer, err := mail.LoadDKIM(keyFile, "s2026")
			c.Assert(err, qt.IsNil)
			f := newFakeRelay(t)
			e := newOutEnv(t, mail.OutboundConfig{Transport: relayFor(t, f, ""), DKIM: signer})
			res := e.send("k1", "ann@customer.example")
			e.waitDelivery(res.MessageID, terminal)
			got := f.messages()
			c.Assert(got, qt.HasLen, 1)
			c.Assert(string(got[0].data), qt.Matches, `(?s)DKIM-Signature: .*d=inboxd\.test.*`)
			verifs, err := dkim.VerifyWithOptions(strings.NewReader(string(got[0].data)), &dkim.VerifyOptions{
				LookupTXT: func(domain string) ([]string, error) {
					if domain != "s2026._domainkey.inboxd.test" {
						return nil, errors.New("no such record " + domain)
					}
					return []string{signer.DNSRecord()}, nil
				},
			})
			c.Assert(err, qt.IsNil)
			c.Assert(verifs, qt.HasLen, 1)
			c.Check(verifs[0].Err, qt.IsNil)
			c.Check(verifs[0].Domain, qt.Equals, "inboxd.test")
			c.Check(verifs[0].HeaderKeys, qt.Contains, "Subject")
		})
	}
}

func TestParseRelay(t *testing.T) {
	tests := []struct {
		url, addr, user, pass, starttls string
		implicit                        bool
		err                             string
	}{
		{url: "smtp://relay.example.com", addr: "relay.example.com:25", starttls: "require"},
		{url: "smtp://me:secret@relay.example.com", addr: "relay.example.com:587", user: "me", pass: "secret", starttls: "require"},
		{url: "smtp://me%40x.test:p%3Aw@relay.example.com:2525", addr: "relay.example.com:2525", user: "me@x.test", pass: "p:w", starttls: "require"},
		{url: "smtps://me:secret@relay.example.com", addr: "relay.example.com:465", user: "me", pass: "secret", implicit: true, starttls: "require"},
		{url: "smtp://127.0.0.1:2525", addr: "127.0.0.1:2525", starttls: "optional"},
		{url: "smtp://relay.example.com?tls=none", addr: "relay.example.com:25", starttls: "none"},
		{url: "smtp://me:pw@relay.example.com?tls=none", err: ".*clear text.*"},
		{url: "http://relay.example.com", err: ".*scheme must be smtp or smtps.*"},
		{url: "smtp://relay.example.com?foo=bar", err: ".*unknown option foo=bar.*"},
		{url: "smtp:///nohost", err: ".*want smtp://.*"},
		// URLs that do not parse are shown without their password.
		{url: "smtp://user:secret@[::1", err: `relay: "smtp://user:xxxxx@\[::1" is not a valid URL: missing ']' in host`},
		{url: "smtp://user:se%zzcret@relay.example.com", err: `relay: "smtp://user:xxxxx@relay.example.com" is not a valid URL`},
		{url: "smtp://user:secret@relay.example.com:bad", err: `relay: "smtp://user:xxxxx@relay.example.com:bad" is not a valid URL: invalid port ":bad" after host`},
		{url: "smtp://us er:sec ret@relay.example.com", err: `relay: "smtp://us er:xxxxx@relay.example.com" is not a valid URL.*`},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c := qt.New(t)
			r, err := mail.ParseRelay(tt.url, "inboxd.test")
			if tt.err != "" {
				c.Assert(err, qt.ErrorMatches, tt.err)
				c.Check(err.Error(), qt.Not(qt.Contains), "secret")
				c.Check(err.Error(), qt.Not(qt.Contains), "cret")
				return
			}
			c.Assert(err, qt.IsNil)
			c.Check(r.Addr, qt.Equals, tt.addr)
			c.Check(r.Username, qt.Equals, tt.user)
			c.Check(r.Password, qt.Equals, tt.pass)
			c.Check(r.Implicit, qt.Equals, tt.implicit)
			c.Check(r.StartTLS, qt.Equals, tt.starttls)
			c.Check(r.String(), qt.Not(qt.Contains), "secret")
		})
	}
}

// TestReceivedMailCarriesTriageSignals: what triage knows of received mail besides its
// words reaches the analysis as the SMTP listener's Receive stores it: the bulk headers of
// a newsletter, and whether a message answers mail the inbox sent (a reply to a message of
// another inbox, or to an unknown one, does not).
func TestReceivedMailCarriesTriageSignals(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	var mu sync.Mutex
	type key struct {
		inbox int64
		id    string
	}
	seen := map[key]db.TriageSignals{}
	e := newOutEnv(t, mail.OutboundConfig{}, func(c *mail.Config) {
		c.TriageNow = func(m *db.NewMessage, now time.Time) *db.Triage {
			mu.Lock()
			defer mu.Unlock()
			seen[key{m.InboxID, m.MessageID}] = m.TriageSignals
			return &db.Triage{Status: db.TriagePending}
		}
	})
	desk, err := db.CreateInbox(ctx, e.store, db.NewInbox{AccountID: "acme", Address: "desk@inboxd.test", DefaultDomain: "inboxd.test"})
	c.Assert(err, qt.IsNil)
	ours := e.send("k1", "desk@inboxd.test") // the agent's mail, received by desk
	e.waitDelivery(ours.MessageID, terminal)
	receive := func(id, headers string) db.TriageSignals {
		raw := "From: Ann <ann@example.com>\r\nTo: agent@inboxd.test\r\nSubject: Re: Hello\r\nMessage-ID: " + id + "\r\n" + headers + "\r\nThanks, that works.\r\n"
		_, err := e.svc.Receive(ctx, mail.Incoming{Data: []byte(raw), Inboxes: []int64{e.inbox.ID, desk.ID}})
		c.Assert(err, qt.IsNil)
		mu.Lock()
		defer mu.Unlock()
		return seen[key{e.inbox.ID, id}]
	}
	c.Check(receive("<r1@example.com>", "In-Reply-To: "+ours.MessageID+"\r\n"), qt.DeepEquals,
		db.TriageSignals{Headers: map[string]string{"In-Reply-To": ours.MessageID}, RepliesToOurs: true})
	c.Check(receive("<r2@example.com>", "References: <x@example.com> "+ours.MessageID+"\r\n").RepliesToOurs, qt.IsTrue)
	c.Check(receive("<r3@example.com>", "In-Reply-To: <unknown@example.com>\r\n").RepliesToOurs, qt.IsFalse)
	c.Check(receive("<news@example.com>", "List-Unsubscribe: <https://example.com/u>\r\nPrecedence: bulk\r\n"), qt.DeepEquals,
		db.TriageSignals{Headers: map[string]string{"List-Unsubscribe": "<https://example.com/u>", "Precedence": "bulk"}})
	// desk received the agent's mail, it did not send it: the same reply is no answer to desk's own.
	mu.Lock()
	defer mu.Unlock()
	c.Check(seen[key{desk.ID, "<r1@example.com>"}].RepliesToOurs, qt.IsFalse)
}
