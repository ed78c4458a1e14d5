package main

import (
	"net/http"
	"net/url"
	"sync"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// The review dashboard on two processes of one database (extensions section 9: every
// operation gives the same answer whichever process serves it): a session made through
// one is a session on the other, with the same form token, and a logout through the other
// ends it on both; the login throttle counts wrong passwords sent to either process
// together, sent one by one or all at once.
func TestDashboardAcrossProcessesOnPostgres(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dbURL := pgtest.NewDatabase(t)
	// Without the race detector (the server tests run this code under it): a password
	// check then costs what it does in production, not seconds.
	bin := fastBinary.get(t, "builds and runs the binary")
	const password = "correct horse battery staple"
	// The tests' requests come over loopback: trusting it makes X-Forwarded-For the client.
	a := startInboxd(t, bin, "--db", dbURL, "--data-dir", t.TempDir(), "--admin-password", password, "--trusted-proxy", "127.0.0.0/8")
	b := startInboxd(t, bin, "--db", dbURL, "--data-dir", t.TempDir(), "--trusted-proxy", "127.0.0.0/8")
	defer func() {
		if t.Failed() {
			t.Logf("process a:\n%s\nprocess b:\n%s", a.logText(), b.logText())
		}
	}()

	// Logged in on A, logged in on B, with the same form token.
	br := newDashClient(t)
	p := br.login(a.api, "192.0.2.10", password)
	c.Assert(p.status, qt.Equals, http.StatusSeeOther, qt.Commentf("%s", p.body))
	onA := br.do(a.api, "/dashboard/", nil)
	c.Assert(onA.status, qt.Equals, http.StatusOK)
	onB := br.do(b.api, "/dashboard/", nil)
	c.Assert(onB.status, qt.Equals, http.StatusOK, qt.Commentf("%s", onB.body))
	c.Assert(onB.csrf(t), qt.Equals, onA.csrf(t))

	// The form token is checked on B as on A; a logout through B ends the session on A.
	c.Assert(br.do(b.api, "/dashboard/logout", url.Values{"csrf": {"forged"}}).status, qt.Equals, http.StatusForbidden)
	session := br.cookies["inboxd_session"]
	p = br.do(b.api, "/dashboard/logout", url.Values{"csrf": {onB.csrf(t)}})
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	c.Assert(p.header.Get("Location"), qt.Equals, "/dashboard/login")
	br.cookies["inboxd_session"] = session // a copy of the cookie kept elsewhere
	p = br.do(a.api, "/dashboard/", nil)
	c.Assert(p.status, qt.Equals, http.StatusSeeOther)
	c.Assert(p.header.Get("Location"), qt.Equals, "/dashboard/login")

	// Wrong passwords sent to A and B in turn: five are checked, the sixth waits on
	// either process, the right password too.
	guess := newDashClient(t)
	procs := []*proc{a, b}
	for i := range 5 {
		p := guess.login(procs[i%2].api, "198.51.100.1", "wrong guess")
		c.Assert(p.status, qt.Equals, http.StatusUnauthorized, qt.Commentf("attempt %d: %s", i+1, p.body))
	}
	for _, pr := range procs {
		p := guess.login(pr.api, "198.51.100.1", password)
		c.Assert(p.status, qt.Equals, http.StatusTooManyRequests)
		c.Assert(p.header.Get("Retry-After"), qt.Equals, "60")
		c.Assert(p.body, qt.Contains, "Too many failed attempts from your address. Try again in 60 seconds.")
	}
	// Another address still logs in, through either.
	c.Assert(newDashClient(t).login(b.api, "192.0.2.50", password).status, qt.Equals, http.StatusSeeOther)

	// Wrong passwords sent at once to both processes get no more checks between them than
	// five sent one by one: the checks the flood left are all the address has.
	const n = 30
	form := newDashClient(t)
	token := form.do(a.api, "/dashboard/login", nil).csrf(t)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			f := &dashClient{t: t, client: form.client, cookies: map[string]string{"inboxd_login": form.cookies["inboxd_login"]}}
			statuses[i] = f.do(procs[i%2].api, "/dashboard/login", url.Values{"csrf": {token}, "password": {"wrong guess"}},
				"X-Forwarded-For", "198.51.100.2").status
		})
	}
	wg.Wait()
	counts := map[int]int{}
	for _, s := range statuses {
		counts[s]++
	}
	c.Assert(counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests]+counts[http.StatusServiceUnavailable], qt.Equals, n,
		qt.Commentf("%v", counts))
	checked := counts[http.StatusUnauthorized]
	c.Assert(checked <= 5, qt.IsTrue, qt.Commentf("%v", counts))
	for i := 0; checked < 5; i++ {
		p := form.login(procs[i%2].api, "198.51.100.2", "wrong guess")
		c.Assert(p.status, qt.Equals, http.StatusUnauthorized, qt.Commentf("after %d checked: %s", checked, p.body))
		checked++
	}
	for _, pr := range procs {
		c.Assert(form.login(pr.api, "198.51.100.2", password).status, qt.Equals, http.StatusTooManyRequests)
	}
}
