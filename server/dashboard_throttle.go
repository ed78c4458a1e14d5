package server

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The dashboard's login throttle. An attempt is counted before its password is checked,
// so attempts sent at once get no more checks than attempts sent one after another. An
// address that keeps guessing waits longer and longer, but no one else has to: there is no
// global lock-out that a guesser could use to keep the operator out. And one password
// check runs at a time, so that a flood of logins, from however many addresses, costs the
// API at most one CPU's worth of bcrypt and is not queued. docs/protection.md's dashboard section
// states the policy.
const (
	// A client gets loginFreeTries password checks. After that many wrong passwords its
	// next check waits loginFirstWait, and every further wrong one doubles the wait, up to
	// loginMaxWait. A right password clears the count; so does loginForget without a
	// wrong one once the wait is over.
	loginFreeTries = 5
	loginFirstWait = time.Minute
	loginMaxWait   = time.Hour
	loginForget    = 15 * time.Minute

	// maxTrackedClients bounds the throttle's memory (about 100 bytes a client). When it
	// is full, the client closest to being forgotten among evictSample looked at is
	// dropped: bounded work under the lock, whatever the number of addresses guessing.
	maxTrackedClients = 10000
	evictSample       = 32

	// loginChecks password checks (bcrypt, tens of milliseconds of a CPU each) run at
	// once, whoever asks: one is about 13 logins a second at the default cost, plenty for
	// a dashboard with one operator, and leaves every other CPU to the API (with two, a
	// flood's checks took both CPUs of a 2-CPU machine and API answers slowed to ~0.7 s
	// under the race detector; with one, ~0.15 s). A login waits at most loginQueueWait
	// for a check, then is told to come back in loginBusyRetry: a flood holds no queue of
	// goroutines.
	loginChecks    = 1
	loginQueueWait = 500 * time.Millisecond
	loginBusyRetry = 5 * time.Second
)

// waitAfter is how long a client waits for its next check after n wrong passwords.
func waitAfter(n int) time.Duration {
	if n < loginFreeTries {
		return 0
	}
	return min(loginMaxWait, loginFirstWait<<min(n-loginFreeTries, 16))
}

// tries is what the throttle knows of one client.
type tries struct {
	pending  int // attempts counted whose password is being checked
	failed   int // wrong passwords since the last right one, or since forgotten
	lastFail time.Time
	reported int // failed+pending+1 when a refusal was last reported: one audit row per wait
}

// waitUntil is when the client's next check may start.
func (c *tries) waitUntil() time.Time { return c.lastFail.Add(waitAfter(c.failed)) }

// forgetAt is when the client may be forgotten, unless it has attempts pending.
func (c *tries) forgetAt() time.Time { return c.waitUntil().Add(loginForget) }

// refusal is the throttle's answer to an attempt: wait zero lets it go ahead.
type refusal struct {
	wait   time.Duration
	report bool // the first refusal of this wait, worth an audit row
}

// throttle counts the login attempts of each client.
type throttle struct {
	mu      sync.Mutex
	clients map[netip.Prefix]*tries
}

// reserve counts an attempt of client key before its password is checked. It is refused
// while the client waits, or while the attempts it has pending use every check it has
// left (then the wait is what it would be if they all failed). An attempt let through
// must be finished.
func (t *throttle) reserve(key netip.Prefix, now time.Time) refusal {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.clients[key]
	if c != nil && c.pending == 0 && !now.Before(c.forgetAt()) {
		c = nil
		delete(t.clients, key)
	}
	if c == nil {
		if !t.makeRoom(now) {
			// Ten thousand clients each have a check under way; this one comes back later.
			return refusal{wait: loginBusyRetry}
		}
		c = &tries{}
		t.clients[key] = c
	}
	var wait time.Duration
	switch {
	case waitAfter(c.failed) > 0 && now.Before(c.waitUntil()):
		// (Only then: now was read before the lock, and a failure finished meanwhile may
		// be a moment later; that is no reason to wait.)
		wait = c.waitUntil().Sub(now)
	case c.pending >= max(1, loginFreeTries-c.failed):
		wait = waitAfter(c.failed + c.pending)
	default:
		c.pending++
		return refusal{}
	}
	// The wait is that of failed+pending wrong passwords (pending ones counted as wrong
	// until they finish): the same number, the same wait, one report.
	mark := c.failed + c.pending + 1
	r := refusal{wait: wait, report: c.reported != mark}
	c.reported = mark
	return r
}

// makeRoom makes sure a new client can be tracked, dropping the one closest to being
// forgotten among a sample when the table is full. It reports false when every client
// sampled has an attempt pending: those must stay counted.
func (t *throttle) makeRoom(now time.Time) bool {
	if len(t.clients) < maxTrackedClients {
		return true
	}
	var victim netip.Prefix
	var at time.Time
	seen := 0
	for k, c := range t.clients { // map order is random: a fair sample
		if seen++; seen > evictSample {
			break
		}
		if c.pending == 0 && (at.IsZero() || c.forgetAt().Before(at)) {
			victim, at = k, c.forgetAt()
		}
	}
	if at.IsZero() {
		return false
	}
	delete(t.clients, victim)
	return true
}

// outcome is how a counted attempt ended.
type outcome int

const (
	unchecked outcome = iota // the password was not checked (no check free, or an error)
	wrongPassword
	rightPassword
)

// finish ends an attempt reserve let through: a wrong password counts, a right one clears
// the client's count, an unchecked attempt is given back.
func (t *throttle) finish(key netip.Prefix, o outcome, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.clients[key]
	if c == nil {
		return
	}
	c.pending--
	switch {
	case o == rightPassword && c.pending == 0:
		delete(t.clients, key)
	case o == rightPassword:
		*c = tries{pending: c.pending}
	case o == wrongPassword:
		c.failed++
		c.lastFail = now
	}
}

// checkBounded checks the password in one of the check slots. checked is false when none
// came free within loginQueueWait, or the client went away meanwhile.
func (d *dashboard) checkBounded(ctx context.Context, password string) (ok, checked bool, err error) {
	t := time.NewTimer(loginQueueWait)
	defer t.Stop()
	select {
	case d.checks <- struct{}{}:
	case <-t.C:
		return false, false, nil
	case <-ctx.Done():
		return false, false, nil
	}
	defer func() { <-d.checks }()
	ok, err = d.checkPassword(ctx, password)
	return ok, err == nil, err
}

// outcomeOf classifies a bounded check for the throttle.
func outcomeOf(ok, checked bool) outcome {
	switch {
	case !checked:
		return unchecked
	case ok:
		return rightPassword
	}
	return wrongPassword
}

// waitText says a wait the way the login page does, rounded up: "40 seconds", "5 minutes".
func waitText(d time.Duration) string {
	if d <= time.Second {
		return "1 second"
	}
	if d < 2*time.Minute {
		return fmt.Sprintf("%d seconds", (d+time.Second-1)/time.Second)
	}
	return fmt.Sprintf("%d minutes", (d+time.Minute-1)/time.Minute)
}

// retryAfter is the Retry-After value of a wait: whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	return fmt.Sprint(int64((d + time.Second - 1) / time.Second))
}

// loginCounts counts login attempts by result for /metrics.
type loginCounts struct {
	ok, wrong, limited, busy atomic.Uint64
}

// write prints the counts, zeros included.
func (c *loginCounts) write(b *strings.Builder) {
	header(b, "inboxd_dashboard_logins_total", "counter", "Dashboard logins by result: ok, wrong_password, "+
		"limited (refused before the check: the address has to wait) and busy (no password check came free; told to come back).")
	for _, r := range []struct {
		name string
		n    *atomic.Uint64
	}{{"ok", &c.ok}, {"wrong_password", &c.wrong}, {"limited", &c.limited}, {"busy", &c.busy}} {
		fmt.Fprintf(b, "inboxd_dashboard_logins_total{result=%q} %d\n", r.name, r.n.Load())
	}
}
