package server

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The dashboard's login throttle. An attempt is counted before its password is checked,
// so attempts sent at once get no more checks than attempts sent one after another. An
// address that keeps guessing waits longer and longer, but no one else has to: there is no
// global lock-out that a guesser could use to keep the operator out. And one password
// check runs at a time, so that a flood of logins, from however many addresses, costs the
// API at most one CPU's worth of bcrypt and is not queued. docs/protection.md's dashboard section
// states the policy.
//
// The counts are the store's (db.DashboardLogins), so they hold across the processes on
// one database and survive a restart: a guesser gets no more tries by spreading its
// guesses over processes. The store counts each attempt in one atomic step and returns the
// client's tries with it; the rule below, the one home of the policy, judges them.
const (
	// A client gets loginFreeTries password checks. After that many wrong passwords its
	// next check waits loginFirstWait, and every further wrong one doubles the wait, up to
	// loginMaxWait. A right password clears the count; so does loginForget without a
	// wrong one once the wait is over.
	loginFreeTries = 5
	loginFirstWait = time.Minute
	loginMaxWait   = time.Hour
	loginForget    = 15 * time.Minute

	// An attempt counted whose check never finished (its process died during it) stops
	// counting once its client has made no attempt for loginLost: a check finishes within
	// loginQueueWait and one bcrypt.
	loginLost = time.Minute

	// Every loginPruneEvery, a process drops the counts of clients idle for loginIdle: the
	// longest wait and the forgetting after it are over, so they hold nothing.
	loginPruneEvery = 10 * time.Minute
	loginIdle       = loginMaxWait + loginForget

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

// waitUntil is when the client's next check may start.
func waitUntil(c db.LoginTries) time.Time { return c.LastFail.Add(waitAfter(c.Failed)) }

// forgotten reports whether the client's failures are forgotten at now: loginForget has
// passed without a wrong password since its wait was over.
func forgotten(c db.LoginTries, now time.Time) bool {
	return c.Failed > 0 && !now.Before(waitUntil(c).Add(loginForget))
}

// refusal is the throttle's answer to an attempt: wait zero lets it go ahead.
type refusal struct {
	wait   time.Duration
	mark   int  // what the wait is about: the wrong passwords it is the wait of, plus one
	report bool // the first refusal of this wait, worth an audit row
}

// judge decides an attempt just counted, from the client's tries with it pending. It is
// refused while the client waits, or while the attempts it has pending (this one
// included) are more than the checks it has left; then the wait is what it would be if
// those checks all failed. A refusal's mark names its wait by the number of wrong
// passwords it is the wait of (plus one), the same while the pending checks finish
// wrong, so that one wait gets one report.
func judge(c db.LoginTries, now time.Time) refusal {
	left := max(1, loginFreeTries-c.Failed)
	switch {
	case waitAfter(c.Failed) > 0 && now.Before(waitUntil(c)):
		return refusal{wait: waitUntil(c).Sub(now), mark: c.Failed + 1}
	case c.Pending > left:
		return refusal{wait: waitAfter(c.Failed + left), mark: c.Failed + left + 1}
	}
	return refusal{}
}

// throttle counts the login attempts of each client, in the store.
type throttle struct {
	store  db.DashboardLogins
	now    func() time.Time
	pruned atomic.Int64 // when this process last pruned the counts (Unix nanoseconds)
}

// reserve counts an attempt of client key before its password is checked, and judges
// it. An attempt let through must be finished; a refused one is given back here.
func (t *throttle) reserve(ctx context.Context, key netip.Prefix) (refusal, error) {
	t.prune(ctx)
	client := key.String()
	c, err := t.store.CountLoginAttempt(ctx, client, loginLost)
	if err != nil {
		return refusal{}, err
	}
	now := t.now() // after the count: no failure it saw is later than now
	if forgotten(c, now) {
		if err := t.store.ForgetLoginTries(ctx, client, c); err != nil {
			return refusal{}, err
		}
		c = db.LoginTries{Pending: c.Pending}
	}
	r := judge(c, now)
	if r.wait > 0 {
		r.report, err = t.store.RefuseLoginAttempt(ctx, client, r.mark)
	}
	return r, err
}

// finish ends an attempt reserve let through: a wrong password counts, a right one clears
// the client's count, an unchecked attempt is given back. It runs even when the client
// has gone away meanwhile.
func (t *throttle) finish(ctx context.Context, key netip.Prefix, o db.LoginOutcome) error {
	return t.store.FinishLoginAttempt(context.WithoutCancel(ctx), key.String(), o)
}

// prune drops the counts of idle clients, every loginPruneEvery (on whichever process
// gets a login then; a failure is tried again at the next login).
func (t *throttle) prune(ctx context.Context) {
	now, last := t.now().UnixNano(), t.pruned.Load()
	if now-last < int64(loginPruneEvery) || !t.pruned.CompareAndSwap(last, now) {
		return
	}
	if t.store.PruneLoginTries(ctx, loginIdle) != nil {
		t.pruned.Store(last)
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
func outcomeOf(ok, checked bool) db.LoginOutcome {
	switch {
	case !checked:
		return db.LoginUnchecked
	case ok:
		return db.LoginRightPassword
	}
	return db.LoginWrongPassword
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
