package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

var (
	passwordLine = regexp.MustCompile(`review dashboard: operator "admin", password \(shown once, stored hashed\): ([a-z2-7]{24})\n`)
	formToken    = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
)

// dashboardLogin logs in to the dashboard at base and returns the status of the login POST
// (303 on success).
func dashboardLogin(t *testing.T, base, password string) int {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(base + "/dashboard/login")
	qt.Assert(t, err, qt.IsNil)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := formToken.FindSubmatch(body)
	qt.Assert(t, m, qt.HasLen, 2)
	res, err = client.PostForm(base+"/dashboard/login", url.Values{"csrf": {string(m[1])}, "password": {password}})
	qt.Assert(t, err, qt.IsNil)
	res.Body.Close()
	return res.StatusCode
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
	c.Assert(dashboardLogin(t, "http://"+m.Addr(), found[1]), qt.Equals, http.StatusSeeOther)
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
