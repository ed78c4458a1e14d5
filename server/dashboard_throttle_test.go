package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"golang.org/x/crypto/bcrypt"

	"github.com/inboxd/inboxd/db"
)

// The tests' requests reach the server over loopback: trusting it makes X-Forwarded-For
// the client address, as behind a reverse proxy on the same machine.
var trustLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// loginFrom posts the login form as the client at addr, behind the trusted proxy.
func (b *browser) loginFrom(addr, password string) page {
	b.t.Helper()
	form := b.get("/dashboard/login")
	return b.post("/dashboard/login", url.Values{"csrf": {form.csrf(b.t)}, "password": {password}}, "X-Forwarded-For", addr)
}

// floodForm is a login form (its cookie and token) for a flood of attempts.
type floodForm struct {
	base, cookie, token string
}

func (d *dashEnv) floodForm() floodForm {
	b := d.browser()
	p := b.get("/dashboard/login")
	u, _ := url.Parse(d.url + "/dashboard/")
	var cookie string
	for _, c := range b.c.Jar.Cookies(u) {
		cookie += c.Name + "=" + c.Value + "; "
	}
	return floodForm{base: d.url, cookie: cookie, token: p.csrf(d.t)}
}

// flood sends n login attempts at once, the i-th from the client at addr(i) ("" for the
// test's own address), and returns their pages; status 0 is a request that failed.
func (f floodForm) flood(n int, password string, addr func(i int) string) []page {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	form := url.Values{"csrf": {f.token}, "password": {password}}.Encode()
	pages := make([]page, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", f.base+"/dashboard/login", strings.NewReader(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Cookie", f.cookie)
			if addr != nil {
				req.Header.Set("X-Forwarded-For", addr(i))
			}
			<-start
			res, err := client.Do(req)
			if err != nil {
				pages[i].body = err.Error()
				return
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				pages[i].body = err.Error()
				return
			}
			pages[i] = page{status: res.StatusCode, header: res.Header, body: string(b)}
		})
	}
	close(start)
	wg.Wait()
	return pages
}

// byStatus counts pages by status.
func byStatus(pages []page) map[int]int {
	n := map[int]int{}
	for _, p := range pages {
		n[p.status]++
	}
	return n
}

func countAction(t *testing.T, store db.Store, action string) int {
	n := 0
	for _, a := range auditActions(t, store) {
		if a == action {
			n++
		}
	}
	return n
}

var metricLine = regexp.MustCompile(`(?m)^inboxd_dashboard_logins_total\{result="limited"\} (\d+)$`)

// Four hundred wrong passwords sent at once from one address get the same five checks as
// five sent one after another; the rest are told to wait, and the audit log gets a row
// per wait, not per refused attempt.
func TestDashboardLoginFloodFromOneAddress(t *testing.T) {
	c := qt.New(t)
	d := newDashEnv(t)
	pages := d.floodForm().flood(400, "wrong guess", nil)
	n := byStatus(pages)
	c.Assert(n[http.StatusUnauthorized] <= 5, qt.IsTrue, qt.Commentf("%v passwords checked, want at most 5", n))
	c.Assert(n[http.StatusUnauthorized]+n[http.StatusTooManyRequests]+n[http.StatusServiceUnavailable], qt.Equals, 400, qt.Commentf("%v", n))
	for _, p := range pages {
		if p.status == http.StatusTooManyRequests {
			secs, err := strconv.Atoi(p.header.Get("Retry-After"))
			c.Assert(err == nil && secs >= 1 && secs <= 3600, qt.IsTrue, qt.Commentf("Retry-After %q", p.header.Get("Retry-After")))
			c.Assert(p.body, qt.Matches, `(?s).*Too many failed attempts from your address. Try again in \d+ (seconds|minutes)\..*`,
				qt.Commentf("Retry-After %s", p.header.Get("Retry-After")))
		}
	}
	c.Assert(countAction(t, d.store, "login_failed"), qt.Equals, n[http.StatusUnauthorized])
	c.Assert(countAction(t, d.store, "login_limited"), qt.Equals, 1, qt.Commentf("%v", auditActions(t, d.store)))

	// Attempts one by one get the checks the flood left, no more; then the address waits,
	// right password or not. /metrics counts every refusal.
	b := d.browser()
	checked := n[http.StatusUnauthorized]
	for ; checked < 5; checked++ {
		c.Assert(b.login("wrong guess").status, qt.Equals, http.StatusUnauthorized)
	}
	p := b.login(operatorPassword)
	c.Assert(p.status, qt.Equals, http.StatusTooManyRequests)
	r := d.do("GET", "/metrics", "", nil)
	m := metricLine.FindStringSubmatch(string(r.body))
	c.Assert(m, qt.HasLen, 2, qt.Commentf("%s", r.body))
	c.Assert(m[1], qt.Equals, strconv.Itoa(n[http.StatusTooManyRequests]+1))
}

// costNear is the bcrypt cost at which a check takes about d here: a flood then costs the
// CPU it costs in production (the race detector makes bcrypt ten times slower).
func costNear(d time.Duration) int {
	h, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	start := time.Now()
	bcrypt.CompareHashAndPassword(h, []byte("y"))
	took, cost := time.Since(start), bcrypt.MinCost
	for took < d && cost < bcrypt.DefaultCost {
		took, cost = 2*took, cost+1
	}
	return cost
}

// A flood of wrong passwords from two hundred addresses at once neither queues up nor
// slows the API: the logins that find no password check free within a moment are told to
// come back, and meanwhile /healthz and an authenticated read answer as usual. (Before,
// such a burst slowed API answers to 1.6-4.5 s.)
func TestDashboardLoginFloodLeavesAPIFast(t *testing.T) {
	c := qt.New(t)
	d := newDashEnvWith(t, dashOptions{trusted: trustLoopback, cost: costNear(50 * time.Millisecond)})
	form := d.floodForm()
	done := make(chan []page)
	go func() {
		done <- form.flood(200, "wrong guess", func(i int) string { return fmt.Sprintf("198.51.100.%d", i) })
	}()
	var slowest time.Duration
	var pages []page
	for pages == nil {
		for _, path := range []string{"/healthz", "/v1/inboxes"} {
			start := time.Now()
			r := d.do("GET", path, d.full, nil)
			c.Assert(r.status, qt.Equals, http.StatusOK)
			slowest = max(slowest, time.Since(start))
		}
		select {
		case pages = <-done:
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.Assert(slowest < 2*time.Second, qt.IsTrue, qt.Commentf("slowest API answer during the flood: %v", slowest))
	n := byStatus(pages)
	c.Assert(n[http.StatusUnauthorized]+n[http.StatusServiceUnavailable], qt.Equals, 200, qt.Commentf("%v", n))
	c.Assert(n[http.StatusServiceUnavailable] > 0, qt.IsTrue, qt.Commentf("%v", n))
	busy := ""
	for i, p := range pages {
		if p.status == http.StatusServiceUnavailable {
			c.Assert(p.header.Get("Retry-After"), qt.Equals, "5")
			c.Assert(p.body, qt.Contains, "Many logins are being checked right now. Try again in 5 seconds.")
			busy = fmt.Sprintf("198.51.100.%d", i)
		}
	}
	// An attempt whose password was not checked did not count: that address has all its
	// tries, and the API stayed fast throughout.
	for range 5 {
		c.Assert(d.browser().loginFrom(busy, "guess").status, qt.Equals, http.StatusUnauthorized)
	}
}

// An address that keeps guessing waits a minute after its fifth wrong password, then twice
// as long after each further one, up to an hour; the page and Retry-After say how long.
// Nobody else waits, the right password after the wait clears the count, and so do 15
// quiet minutes after a wait.
func TestDashboardLoginWaitsGrow(t *testing.T) {
	c := qt.New(t)
	var moved atomic.Int64 // the server's clock, moved by hand
	advance := func(d time.Duration) { moved.Add(int64(d)) }
	now := func() time.Time { return time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(moved.Load())) }
	d := newDashEnvWith(t, dashOptions{now: now, trusted: trustLoopback})
	b := d.browser()
	const guesser = "203.0.113.9"
	for range 5 {
		c.Assert(b.loginFrom(guesser, "guess").status, qt.Equals, http.StatusUnauthorized)
	}
	waits := []struct {
		seconds int
		text    string
	}{{60, "60 seconds"}, {120, "2 minutes"}, {240, "4 minutes"}, {480, "8 minutes"}, {960, "16 minutes"},
		{1920, "32 minutes"}, {3600, "60 minutes"}, {3600, "60 minutes"}}
	for i, w := range waits {
		if i > 0 {
			advance(time.Duration(waits[i-1].seconds) * time.Second)
			c.Assert(b.loginFrom(guesser, "guess").status, qt.Equals, http.StatusUnauthorized)
		}
		for _, password := range []string{"guess", operatorPassword} { // refused unchecked
			p := b.loginFrom(guesser, password)
			c.Assert(p.status, qt.Equals, http.StatusTooManyRequests)
			c.Assert(p.header.Get("Retry-After"), qt.Equals, strconv.Itoa(w.seconds))
			c.Assert(p.body, qt.Contains, "Try again in "+w.text+".")
		}
	}
	c.Assert(countAction(t, d.store, "login_limited"), qt.Equals, len(waits))

	// Meanwhile the operator, at another address, logs in at once.
	c.Assert(d.browser().loginFrom("192.0.2.50", operatorPassword).status, qt.Equals, http.StatusSeeOther)

	// After the wait the right password works, and the address has five tries again.
	advance(time.Hour)
	c.Assert(b.loginFrom(guesser, operatorPassword).status, qt.Equals, http.StatusSeeOther)
	b = d.browser()
	for range 5 {
		c.Assert(b.loginFrom(guesser, "guess").status, qt.Equals, http.StatusUnauthorized)
	}
	c.Assert(b.loginFrom(guesser, "guess").header.Get("Retry-After"), qt.Equals, "60")

	// Fifteen minutes without a wrong password once the wait is over: five tries again.
	advance(time.Minute + 15*time.Minute)
	for range 5 {
		c.Assert(b.loginFrom(guesser, "guess").status, qt.Equals, http.StatusUnauthorized)
	}
	c.Assert(b.loginFrom(guesser, "guess").status, qt.Equals, http.StatusTooManyRequests)
}

// Guessers at many addresses do not lock the operator out: 120 wrong passwords from 24
// addresses, and the operator logs in from their own at once.
func TestDashboardLoginGuessersElsewhereDoNotLockOut(t *testing.T) {
	c := qt.New(t)
	d := newDashEnvWith(t, dashOptions{trusted: trustLoopback})
	b := d.browser()
	for i := range 24 {
		for range 5 {
			c.Assert(b.loginFrom(fmt.Sprintf("198.51.100.%d", i), "guess").status, qt.Equals, http.StatusUnauthorized)
		}
	}
	c.Assert(b.loginFrom("192.0.2.50", operatorPassword).status, qt.Equals, http.StatusSeeOther)
}

// An IPv6 host usually has a whole /64: its addresses share one count, and the next /64
// has its own.
func TestDashboardLoginIPv6ByPrefix(t *testing.T) {
	c := qt.New(t)
	d := newDashEnvWith(t, dashOptions{trusted: trustLoopback})
	b := d.browser()
	for i := range 5 {
		c.Assert(b.loginFrom(fmt.Sprintf("2001:db8:1:2::%x", i+1), "guess").status, qt.Equals, http.StatusUnauthorized)
	}
	c.Assert(b.loginFrom("2001:db8:1:2:ffff:ffff:ffff:ffff", operatorPassword).status, qt.Equals, http.StatusTooManyRequests)
	c.Assert(b.loginFrom("2001:db8:1:3::1", operatorPassword).status, qt.Equals, http.StatusSeeOther)
}

// The client address, as the audit log records it (and the throttle counts by): the peer,
// unless the peer is a trusted proxy; then the right-most X-Forwarded-For entry that is not
// one, so that a client cannot pick its own address by sending the header itself.
func TestDashboardClientAddress(t *testing.T) {
	c := qt.New(t)
	remotes := func(d *dashEnv) []string {
		entries, err := d.store.AuditLog(context.Background(), 100, 0)
		c.Assert(err, qt.IsNil)
		var out []string
		for i := len(entries) - 1; i >= 0; i-- {
			if entries[i].Action == "login_failed" {
				out = append(out, entries[i].Remote)
			}
		}
		return out
	}

	d := newDashEnv(t) // no trusted proxy: the header is the client's word
	d.browser().loginFrom("203.0.113.7", "guess")
	c.Assert(remotes(d), qt.DeepEquals, []string{"127.0.0.1"})

	d = newDashEnvWith(t, dashOptions{trusted: append(trustLoopback, netip.MustParsePrefix("10.0.0.0/8"))})
	cases := []struct{ header, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{"198.51.100.1, 203.0.113.7", "203.0.113.7"}, // the client wrote the first one
		{"203.0.113.7, 10.1.2.3", "203.0.113.7"},     // two proxies of ours
		{"[2001:db8::7]:443", "2001:db8::7"},
		{"::ffff:203.0.113.8", "203.0.113.8"},
		{"not-an-ip, 203.0.113.7", "203.0.113.7"},
		{"203.0.113.7, not-an-ip", "127.0.0.1"}, // the proxy's own entry is unreadable
		{"10.9.9.9", "10.9.9.9"},                // only proxies: the left-most
	}
	var want []string
	for _, tc := range cases {
		c.Assert(d.browser().loginFrom(tc.header, "guess").status, qt.Equals, http.StatusUnauthorized, qt.Commentf("%s", tc.header))
		want = append(want, tc.want)
	}
	c.Assert(remotes(d), qt.DeepEquals, want)
}
