package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"golang.org/x/crypto/bcrypt"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/server"
)

const operatorPassword = "correct horse battery staple"

// dashEnv is an API server whose mail service scans received mail with the built-in
// scanner (no DNS), with the operator password set, and an inbox support@ of acme.
type dashEnv struct {
	*env
	inbox string
}

func newDashEnv(t *testing.T) *dashEnv { return newDashEnvWith(t, dashOptions{}) }

// dashOptions vary a dashboard test's server: its clock (nil: time.Now), the proxies it
// trusts, and the bcrypt cost of the operator's hash (0: the lowest).
type dashOptions struct {
	now     func() time.Time
	trusted []netip.Prefix
	cost    int
}

func newDashEnvWith(t *testing.T, opts dashOptions) *dashEnv {
	t.Helper()
	c := qt.New(t)
	ctx := context.Background()
	// The base URL is the server's own origin: the dashboard accepts forms from it.
	s := newServer(t, serverOptions{now: opts.now, protect: &protect.Config{}, noIndex: true, origin: true,
		api: func(cfg *server.Config) { cfg.TrustedProxies = opts.trusted }})
	// The operator's hash at bcrypt's lowest cost: a login then costs milliseconds, not
	// seconds, under the race detector. (EnsureOperatorPassword is tested in main.)
	key := sha256.Sum256([]byte(operatorPassword))
	hash, err := bcrypt.GenerateFromPassword([]byte(base64.StdEncoding.EncodeToString(key[:])), max(opts.cost, bcrypt.MinCost))
	c.Assert(err, qt.IsNil)
	c.Assert(s.store.SetOperatorPasswordHash(ctx, server.Operator, hash, "password_set"), qt.IsNil)
	e := &env{testServer: s, t: t}
	c.Assert(db.EnsureAccount(ctx, s.store, db.Account{ID: "acme", Plan: "developer"}, nil), qt.IsNil)
	e.full = e.newKey("acme", db.AllScopes()...)
	d := &dashEnv{env: e}
	d.inbox = e.createInbox("support")
	return d
}

// receive hands a message to the receive pipeline as the SMTP listener does, and returns
// its Message-ID.
func (d *dashEnv) receive(raw string) string {
	d.t.Helper()
	in, err := d.store.InboxByAddress(context.Background(), "acme", d.inbox)
	qt.Assert(d.t, err, qt.IsNil)
	st, err := d.svc.Receive(context.Background(), mail.Incoming{Data: []byte(raw), Inboxes: []int64{in.ID},
		RemoteIP: net.ParseIP("192.0.2.7"), Helo: "mx.sender.example", MailFrom: "sender@sender.example"})
	qt.Assert(d.t, err, qt.IsNil)
	return st[0].MessageID
}

// Messages a test sends.
func spamMail(id string) string {
	return "From: Prize Desk <prizes@sender.example>\r\nTo: support@inboxd.test\r\nSubject: WINNER!!! CLAIM YOUR PRIZE NOW\r\n" +
		"Message-ID: <" + id + ">\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\n\r\n" +
		"Congratulations you have won $1,000,000 in our lottery. Act now: http://192.0.2.9/claim\r\n"
}

func eicarMail(id string) string {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	tw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"text/plain; charset=utf-8"}})
	io.WriteString(tw, "Please find the invoice attached.")
	aw, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/octet-stream"},
		"Content-Disposition": {`attachment; filename="invoice.com"`}, "Content-Transfer-Encoding": {"base64"}})
	io.WriteString(aw, base64.StdEncoding.EncodeToString([]byte(protect.EICAR)))
	mw.Close()
	return "From: Billing <billing@sender.example>\r\nTo: support@inboxd.test\r\nSubject: Invoice attached\r\n" +
		"Message-ID: <" + id + ">\r\nDate: Mon, 02 Mar 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=" + mw.Boundary() + "\r\n\r\n" + buf.String()
}

// browser is a dashboard client with a cookie jar that does not follow redirects.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
}

func (d *dashEnv) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: d.t, base: d.url, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) get(path string) page {
	b.t.Helper()
	res, err := b.c.Get(b.base + path)
	qt.Assert(b.t, err, qt.IsNil)
	return readPage(b.t, res)
}

func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	req, err := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	qt.Assert(b.t, err, qt.IsNil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := b.c.Do(req)
	qt.Assert(b.t, err, qt.IsNil)
	return readPage(b.t, res)
}

func readPage(t *testing.T, res *http.Response) page {
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	qt.Assert(t, err, qt.IsNil)
	return page{status: res.StatusCode, header: res.Header, body: string(b)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (p page) csrf(t *testing.T) string {
	m := csrfRE.FindStringSubmatch(p.body)
	qt.Assert(t, m, qt.HasLen, 2, qt.Commentf("no CSRF token in %s", p.body))
	return html.UnescapeString(m[1])
}

// login logs the browser in and returns the CSRF token of its session.
func (b *browser) login(password string) page {
	b.t.Helper()
	form := b.get("/dashboard/login")
	return b.post("/dashboard/login", url.Values{"csrf": {form.csrf(b.t)}, "password": {password}})
}

func (b *browser) loggedIn() string {
	b.t.Helper()
	p := b.login(operatorPassword)
	qt.Assert(b.t, p.status, qt.Equals, http.StatusSeeOther, qt.Commentf("%s", p.body))
	return b.get("/dashboard/").csrf(b.t)
}

var reviewLink = regexp.MustCompile(`href="/dashboard/messages/([0-9a-f-]{36})"`)

// reviewID finds the dashboard id of the queue item whose page mentions text.
func (b *browser) reviewID(text string) string {
	b.t.Helper()
	q := b.get("/dashboard/")
	for _, item := range strings.Split(q.body, `<article class="card item">`)[1:] {
		if strings.Contains(item, text) {
			return reviewLink.FindStringSubmatch(item)[1]
		}
	}
	b.t.Fatalf("no queue item mentions %q in %s", text, q.body)
	return ""
}

func auditActions(t *testing.T, store db.Store) []string {
	entries, err := store.AuditLog(context.Background(), 100, 0)
	qt.Assert(t, err, qt.IsNil)
	var out []string
	for i := len(entries) - 1; i >= 0; i-- {
		out = append(out, entries[i].Action)
	}
	return out
}

func TestDashboardLogin(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	b := d.browser()

	p := b.get("/dashboard/")
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	c.Assert(p.header.Get("Location"), qt.Equals, "/dashboard/login")

	p = b.get("/dashboard/login")
	c.Assert(p.status, qt.Equals, http.StatusOK)
	c.Assert(p.header.Get("Content-Security-Policy"), qt.Contains, "default-src 'self'")
	c.Assert(p.header.Get("Content-Security-Policy"), qt.Contains, "script-src 'none'")
	c.Assert(p.header.Get("X-Frame-Options"), qt.Equals, "DENY")
	c.Assert(p.header.Get("X-Content-Type-Options"), qt.Equals, "nosniff")
	c.Assert(p.header.Get("Referrer-Policy"), qt.Equals, "same-origin")
	c.Assert(p.header.Get("Cache-Control"), qt.Equals, "no-store")
	c.Assert(p.body, qt.Not(qt.Contains), "<script")
	c.Assert(p.body, qt.Not(qt.Contains), "http://") // every asset is our own
	loginToken := p.csrf(t)

	// Without the form's token, and with a token from elsewhere, nothing is checked.
	c.Assert(b.post("/dashboard/login", url.Values{"password": {operatorPassword}}).status, qt.Equals, http.StatusForbidden)
	c.Assert(b.post("/dashboard/login", url.Values{"csrf": {"forged"}, "password": {operatorPassword}}).status, qt.Equals, http.StatusForbidden)

	p = b.post("/dashboard/login", url.Values{"csrf": {loginToken}, "password": {"wrong"}})
	c.Assert(p.status, qt.Equals, http.StatusUnauthorized)
	c.Assert(p.body, qt.Contains, "Wrong password")

	p = b.login(operatorPassword)
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	c.Assert(p.header.Get("Location"), qt.Equals, "/dashboard/")
	setCookie := strings.Join(p.header.Values("Set-Cookie"), "\n")
	c.Assert(setCookie, qt.Matches, `(?s).*inboxd_session=[A-Za-z0-9_-]{43}; Path=/dashboard/; Max-Age=43200; HttpOnly; SameSite=Strict.*`)

	p = b.get("/dashboard/")
	c.Assert(p.status, qt.Equals, http.StatusOK)
	c.Assert(p.body, qt.Contains, "No quarantined messages")
	token := p.csrf(t)

	// Every form of a session carries its token; a POST without it is refused.
	c.Assert(b.post("/dashboard/logout", url.Values{}).status, qt.Equals, http.StatusForbidden)
	p = b.post("/dashboard/logout", url.Values{"csrf": {token}})
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	c.Assert(b.get("/dashboard/").status, qt.Equals, http.StatusSeeOther)
	c.Assert(auditActions(t, d.store), qt.DeepEquals, []string{"password_set", "login_failed", "login", "logout"})
}

func TestDashboardLoginRateLimited(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	b := d.browser()
	for range 5 {
		c.Assert(b.login("guess").status, qt.Equals, http.StatusUnauthorized)
	}
	// The sixth try waits, even with the right password.
	p := b.login(operatorPassword)
	c.Assert(p.status, qt.Equals, http.StatusTooManyRequests)
	c.Assert(p.header.Get("Retry-After"), qt.Not(qt.Equals), "")
	c.Assert(p.body, qt.Contains, "Too many failed attempts")
	c.Assert(auditActions(t, d.store)[6:], qt.DeepEquals, []string{"login_limited"})
}

func TestDashboardReleaseSpam(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	ham := d.receive("From: a@sender.example\r\nTo: support@inboxd.test\r\nSubject: Lunch\r\nMessage-ID: <ham@x>\r\n\r\nNoon?\r\n")
	spam := d.receive(spamMail("spam@x"))

	// The API hides it, and shows it quarantined when asked.
	list := d.ok("listMessages", "GET", inboxPath(d.inbox)+"/messages", d.full, nil)
	c.Assert(ids(list, "messages"), qt.DeepEquals, []string{ham})
	m := d.ok("getMessage", "GET", msgPath(d.inbox, spam), d.full, nil)
	c.Assert(m["labels"], qt.DeepEquals, []any{"quarantined"})
	prot := m["protection"].(map[string]any)
	c.Assert(prot["status"], qt.Equals, "quarantined")
	c.Assert(prot["reasons"], qt.DeepEquals, []any{"spam"})
	c.Assert(m["triage"], qt.IsNil)
	c.Assert(m["senderAuthentication"], qt.Equals, "unauthenticated") // no DNS here, so no DMARC pass

	b := d.browser()
	token := b.loggedIn()
	q := b.get("/dashboard/")
	c.Assert(q.body, qt.Contains, "WINNER!!! CLAIM YOUR PRIZE NOW")
	c.Assert(q.body, qt.Contains, "support@inboxd.test")
	c.Assert(q.body, qt.Not(qt.Contains), "Lunch") // only held mail is listed
	id := b.reviewID("WINNER")

	v := b.get("/dashboard/messages/" + id)
	c.Assert(v.status, qt.Equals, http.StatusOK)
	for _, want := range []string{"SPAM_PHRASES_MANY", "SUBJECT_ALL_CAPS", "MONEY_AMOUNT", "10.5</strong> against threshold 6",
		`id="spf">unavailable`, "built-in rules", "Congratulations you have won"} {
		c.Assert(v.body, qt.Contains, want)
	}

	// A form from another site, or without the token, is refused.
	c.Assert(b.post("/dashboard/messages/"+id+"/release", url.Values{"csrf": {token}}, "Origin", "http://evil.example").status, qt.Equals, http.StatusForbidden)
	c.Assert(b.post("/dashboard/messages/"+id+"/release", url.Values{}).status, qt.Equals, http.StatusForbidden)
	// Without an Origin, what else the browser says of the form's site counts.
	c.Assert(b.post("/dashboard/messages/"+id+"/release", url.Values{"csrf": {token}}, "Sec-Fetch-Site", "cross-site").status, qt.Equals, http.StatusForbidden)
	c.Assert(b.post("/dashboard/messages/"+id+"/release", url.Values{"csrf": {token}}, "Referer", "http://evil.example/x").status, qt.Equals, http.StatusForbidden)

	p := b.post("/dashboard/messages/"+id+"/release", url.Values{"csrf": {token}}, "Origin", d.url)
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	c.Assert(b.get(p.header.Get("Location")).body, qt.Contains, "Released")

	m = d.ok("getMessage", "GET", msgPath(d.inbox, spam), d.full, nil)
	c.Assert(m["labels"], qt.DeepEquals, []any{"received", "unread"})
	prot = m["protection"].(map[string]any)
	c.Assert(prot["status"], qt.Equals, "released")
	c.Assert(prot["releasedBy"], qt.Equals, "admin")
	c.Assert(prot["reasons"], qt.DeepEquals, []any{"spam"}) // the verdict stays as it was
	c.Assert(m["triage"], qt.DeepEquals, map[string]any{"status": "pending"})
	list = d.ok("listMessages", "GET", inboxPath(d.inbox)+"/messages", d.full, nil)
	c.Assert(ids(list, "messages"), qt.DeepEquals, []string{spam, ham})

	// Releasing again changes nothing.
	p = b.post("/dashboard/messages/"+id+"/release", url.Values{"csrf": {token}})
	c.Assert(p.header.Get("Location"), qt.Equals, "/dashboard/?done=already")
	c.Assert(auditActions(t, d.store), qt.DeepEquals, []string{"password_set", "login", "view", "release"})
}

func TestDashboardMalwareCannotBeReleased(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	virus := d.receive(eicarMail("virus@x"))
	m := d.ok("getMessage", "GET", msgPath(d.inbox, virus), d.full, nil)
	prot := m["protection"].(map[string]any)
	c.Assert(prot["reasons"], qt.DeepEquals, []any{"malware"})
	c.Assert(prot["antivirus"], qt.DeepEquals, map[string]any{"status": "infected", "signatures": []any{"Eicar-Test-Signature"}})

	b := d.browser()
	token := b.loggedIn()
	id := b.reviewID("Invoice attached")
	v := b.get("/dashboard/messages/" + id)
	c.Assert(v.body, qt.Contains, `id="release" class="primary" disabled`)
	c.Assert(v.body, qt.Contains, "cannot be released")
	c.Assert(v.body, qt.Contains, "invoice.com")

	p := b.post("/dashboard/messages/"+id+"/release", url.Values{"csrf": {token}})
	c.Assert(p.status, qt.Equals, http.StatusForbidden)
	c.Assert(p.body, qt.Contains, "malware_blocked")
	m = d.ok("getMessage", "GET", msgPath(d.inbox, virus), d.full, nil)
	c.Assert(m["protection"].(map[string]any)["status"], qt.Equals, "quarantined")

	p = b.post("/dashboard/messages/"+id+"/delete", url.Values{"csrf": {token}})
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	d.fails(404, "not_found", "GET", msgPath(d.inbox, virus), d.full, nil)
	c.Assert(b.get("/dashboard/messages/"+id).status, qt.Equals, http.StatusNotFound)
	c.Assert(auditActions(t, d.store), qt.DeepEquals, []string{"password_set", "login", "view", "release_refused", "delete"})
	a := b.get("/dashboard/audit")
	c.Assert(a.body, qt.Contains, "release_refused")
	c.Assert(a.body, qt.Contains, "&lt;virus@x&gt;")
}

// Whatever a message says is shown as text: markup in the subject, sender name, body and
// HTML part never becomes markup in the dashboard, and nothing remote is referenced.
func TestDashboardEscapesMessageContent(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	raw := "From: \"<img src=x onerror=alert(1)>\" <evil@sender.example>\r\nTo: support@inboxd.test\r\n" +
		"Subject: <script>alert('subject')</script> WIN MONEY NOW!!!\r\nMessage-ID: <xss@x>\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n" +
		"<script>alert('text')</script> you have won the lottery, claim your prize, act now " + protect.GTUBE + "\r\n" +
		"--b\r\nContent-Type: text/html\r\n\r\n<p>hi<img src=\"http://tracker.example/p.gif\"><script>alert('html')</script></p>\r\n--b--\r\n"
	d.receive(raw)
	b := d.browser()
	b.loggedIn()
	q := b.get("/dashboard/")
	id := b.reviewID("WIN MONEY")
	v := b.get("/dashboard/messages/" + id)
	for _, body := range []string{q.body, v.body} {
		c.Assert(body, qt.Not(qt.Contains), "<script")
		c.Assert(body, qt.Not(qt.Contains), "<img")
		c.Assert(body, qt.Not(qt.Contains), `src="http`)
		c.Assert(body, qt.Contains, "&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;")
	}
	c.Assert(v.body, qt.Contains, "&lt;script&gt;alert(&#39;text&#39;)&lt;/script&gt;")
	c.Assert(v.body, qt.Contains, "&lt;img src=&#34;http://tracker.example/p.gif&#34;&gt;") // the HTML source, as text
	c.Assert(v.header.Get("Content-Security-Policy"), qt.Contains, "img-src 'self'")
}

func TestDashboardUnknownMessage(t *testing.T) {
	d := newDashEnv(t)
	b := d.browser()
	b.loggedIn()
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "not-a-uuid", "%3Cscript%3E"} {
		p := b.get("/dashboard/messages/" + id)
		qt.Assert(t, p.status, qt.Equals, http.StatusNotFound)
		qt.Assert(t, p.body, qt.Not(qt.Contains), "<script>")
	}
}

// The queue narrows to one account or inbox and pages newest first.
func TestDashboardQueueFilters(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	other := d.createInbox("sales")
	in, err := d.store.InboxByAddress(context.Background(), "acme", other)
	c.Assert(err, qt.IsNil)
	_, err = d.svc.Receive(context.Background(), mail.Incoming{Data: []byte(strings.ReplaceAll(spamMail("s2@x"), "WINNER", "SALES WINNER")), Inboxes: []int64{in.ID}})
	c.Assert(err, qt.IsNil)
	time.Sleep(5 * time.Millisecond)
	d.receive(spamMail("s1@x"))
	b := d.browser()
	b.loggedIn()
	all := b.get("/dashboard/")
	c.Assert(strings.Index(all.body, "SALES WINNER") > strings.Index(all.body, "support@inboxd.test</span>"), qt.IsTrue) // newest first
	c.Assert(all.body, qt.Contains, `sales@inboxd.test</a> <span class="count">1</span>`)
	one := b.get("/dashboard/?account=acme&inbox=sales%40inboxd.test")
	c.Assert(one.body, qt.Contains, "SALES WINNER")
	c.Assert(strings.Count(one.body, `<article class="card item">`), qt.Equals, 1)
	c.Assert(b.get("/dashboard/?before=garbage").status, qt.Equals, http.StatusUnprocessableEntity)
}

// Mail between inboxes of this server is scanned too: authentication passes by
// construction, the content is judged like any other.
func TestInternalMailIsScanned(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	agent := d.createInbox("agent")
	sent := d.ok("send", "POST", inboxPath(agent)+"/messages/send", d.full, map[string]any{
		"to": []string{d.inbox}, "subject": "test", "text": "GTUBE: " + protect.GTUBE, "idempotencyKey": "g1",
	})
	var m map[string]any
	d.eventually("local delivery", func() bool {
		r := d.do("GET", msgPath(d.inbox, sent["messageId"].(string)), d.full, nil)
		if r.status != http.StatusOK {
			return false
		}
		m = r.json(t)
		return true
	})
	prot := m["protection"].(map[string]any)
	c.Assert(prot["status"], qt.Equals, "quarantined")
	c.Assert(prot["reasons"], qt.DeepEquals, []any{"spam"})
	c.Assert(prot["authentication"], qt.DeepEquals, map[string]any{"spf": "pass", "dkim": "pass", "dmarc": "pass", "signingDomains": []any{}})
	c.Assert(m["labels"], qt.DeepEquals, []any{"quarantined"})
}
