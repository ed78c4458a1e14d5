package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

var (
	passwordLine = regexp.MustCompile(`review dashboard: operator "admin", password \(shown once, stored hashed\): ([a-z2-7]{24})\n`)
	formToken    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// dashClient is a browser of the review dashboard that keeps its cookies itself, whatever
// process answered, so that a cookie one process set is presented to another, as a
// browser does behind a load balancer.
type dashClient struct {
	t       *testing.T
	client  *http.Client
	cookies map[string]string
}

func newDashClient(t *testing.T) *dashClient {
	return &dashClient{t: t, cookies: map[string]string{}, client: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// dashPage is an answer of the dashboard.
type dashPage struct {
	status int
	header http.Header
	body   string
}

// do sends a request to base+path with the client's cookies (a POST with form), and keeps
// the cookies the answer sets. headers are name, value pairs.
func (d *dashClient) do(base, path string, form url.Values, headers ...string) dashPage {
	d.t.Helper()
	method, body := "GET", io.Reader(nil)
	if form != nil {
		method, body = "POST", strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	qt.Assert(d.t, err, qt.IsNil)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for name, value := range d.cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := d.client.Do(req)
	qt.Assert(d.t, err, qt.IsNil)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	qt.Assert(d.t, err, qt.IsNil)
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(d.cookies, c.Name)
		} else {
			d.cookies[c.Name] = c.Value
		}
	}
	return dashPage{status: res.StatusCode, header: res.Header, body: string(b)}
}

// csrf is the token of the page's forms.
func (p dashPage) csrf(t *testing.T) string {
	t.Helper()
	m := formToken.FindStringSubmatch(p.body)
	qt.Assert(t, m, qt.HasLen, 2, qt.Commentf("no form token in %d %s", p.status, p.body))
	return m[1]
}

// login posts the login form of base with password, as the client at addr (X-Forwarded-For
// from the trusted loopback proxy; "": the peer).
func (d *dashClient) login(base, addr, password string) dashPage {
	d.t.Helper()
	token := d.do(base, "/dashboard/login", nil).csrf(d.t)
	var headers []string
	if addr != "" {
		headers = []string{"X-Forwarded-For", addr}
	}
	return d.do(base, "/dashboard/login", url.Values{"csrf": {token}, "password": {password}}, headers...)
}

// A fresh server generates the dashboard password and prints it once; it works, and a
// restart does not print it but says how to set another.
func TestDashboardPassword(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var out bytes.Buffer
	m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", DNS: "off", Stdout: &out}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	found := passwordLine.FindStringSubmatch(out.String())
	c.Assert(found, qt.HasLen, 2, qt.Commentf("output: %s", out.String()))
	c.Assert(newDashClient(t).login("http://"+m.Addr(), "", found[1]).status, qt.Equals, http.StatusSeeOther)
	c.Assert(m.Close(), qt.IsNil)

	// A restart keeps it and does not print it again, but says how to set another. (Each
	// bcrypt costs seconds under the race detector, so the --admin-password path is left
	// to the README's walk-through.)
	out.Reset()
	m = &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", DNS: "off", Stdout: &out}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	c.Assert(out.String(), qt.Not(qt.Contains), found[1])
	c.Assert(passwordLine.MatchString(out.String()), qt.IsFalse)
	c.Assert(out.String(), qt.Contains, "review dashboard: operator \"admin\", the password printed at the first start; to set another, start with INBOXD_ADMIN_PASSWORD")
	c.Assert(m.Close(), qt.IsNil)
}

// A dashboard session lives in the database: it survives a restart of the server on the
// same file, with the same form token, and a logout after the restart ends it.
func TestDashboardSessionSurvivesRestart(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var out bytes.Buffer
	start := func() *Main {
		m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", DNS: "off", Stdout: &out}
		c.Assert(m.Run(context.Background()), qt.IsNil)
		return m
	}
	m := start()
	found := passwordLine.FindStringSubmatch(out.String())
	c.Assert(found, qt.HasLen, 2, qt.Commentf("output: %s", out.String()))
	br := newDashClient(t)
	c.Assert(br.login("http://"+m.Addr(), "", found[1]).status, qt.Equals, http.StatusSeeOther)
	before := br.do("http://"+m.Addr(), "/dashboard/", nil)
	c.Assert(before.status, qt.Equals, http.StatusOK)
	c.Assert(m.Close(), qt.IsNil)

	m = start()
	defer m.Close()
	base := "http://" + m.Addr()
	after := br.do(base, "/dashboard/", nil)
	c.Assert(after.status, qt.Equals, http.StatusOK, qt.Commentf("%s", after.body))
	c.Assert(after.csrf(t), qt.Equals, before.csrf(t))
	c.Assert(br.do(base, "/dashboard/logout", url.Values{"csrf": {after.csrf(t)}}).status, qt.Equals, http.StatusSeeOther)
	c.Assert(br.do(base, "/dashboard/", nil).header.Get("Location"), qt.Equals, "/dashboard/login")
}

func TestProtectionFlags(t *testing.T) {
	t.Parallel()
	for _, m := range []*Main{
		{DNS: "8.8.8.8"},
		{Spamd: "localhost"},
		{Clamd: "/run/clamav/clamd.ctl"},
		{Clamd: "tcp:localhost"},
	} {
		m.DBPath, m.HTTPAddr, m.Domain = filepath.Join(t.TempDir(), "inboxd.db"), "127.0.0.1:0", "inboxd.test"
		err := m.Run(context.Background())
		var ue usageError
		qt.Assert(t, errors.As(err, &ue), qt.IsTrue, qt.Commentf("%+v: %v", m, err))
		qt.Assert(t, strings.Contains(err.Error(), "HOST:PORT") || strings.Contains(err.Error(), "unix:PATH"), qt.IsTrue, qt.Commentf("%v", err))
	}
}
