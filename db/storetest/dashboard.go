package storetest

import (
	"crypto/sha256"
	"sort"
	"sync"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// sessionHash is the key of a session whose cookie's token is token.
func sessionHash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// withOperator stores the operator admin.
func (e *env) withOperator() {
	e.Helper()
	e.Assert(e.st.SetOperatorPasswordHash(e.ctx, "admin", []byte("hash"), "password_set"), qt.IsNil)
}

// session returns the live session of token, nil when there is none.
func (e *env) session(token string) *db.DashboardSession {
	e.Helper()
	s, err := e.st.DashboardSession(e.ctx, sessionHash(token))
	e.Assert(err, qt.IsNil)
	return s
}

// newSession stores a session of admin for token lasting d, keeping keep.
func (e *env) newSession(token string, d time.Duration, keep int) {
	e.Helper()
	e.Assert(e.st.CreateDashboardSession(e.ctx, sessionHash(token), "admin", e.clock().Add(d), keep), qt.IsNil)
}

// countAttempt counts an attempt of client (lost after a minute).
func (e *env) countAttempt(client string) db.LoginTries {
	e.Helper()
	t, err := e.st.CountLoginAttempt(e.ctx, client, time.Minute)
	e.Assert(err, qt.IsNil)
	return t
}

// attempt counts an attempt of client and finishes it with o.
func (e *env) attempt(client string, o db.LoginOutcome) db.LoginTries {
	e.Helper()
	t := e.countAttempt(client)
	e.Assert(e.st.FinishLoginAttempt(e.ctx, client, o), qt.IsNil)
	return t
}

const guesser = "192.0.2.1/32"

func dashboardTests() []test {
	return []test{
		{"a session is found until it expires or ends", func(e *env) {
			e.withOperator()
			e.newSession("one", time.Hour, 10)
			s := e.session("one")
			e.Assert(s, qt.IsNotNil)
			e.Assert(s.Operator, qt.Equals, "admin")
			e.Assert(s.Expires.Equal(start().Add(time.Hour)), qt.IsTrue, qt.Commentf("%v", s.Expires))
			e.Assert(e.session("unknown"), qt.IsNil)

			e.newSession("two", 2*time.Hour, 10)
			e.Assert(e.st.EndDashboardSession(e.ctx, sessionHash("two")), qt.IsNil)
			e.Assert(e.session("two"), qt.IsNil)
			e.Assert(e.st.EndDashboardSession(e.ctx, sessionHash("two")), qt.IsNil) // ending it again changes nothing

			e.advance(time.Hour - time.Millisecond)
			e.Assert(e.session("one"), qt.IsNotNil)
			e.advance(time.Millisecond)
			e.Assert(e.session("one"), qt.IsNil)
		}},
		{"a session needs an operator", func(e *env) {
			err := e.st.CreateDashboardSession(e.ctx, sessionHash("one"), "nobody", e.clock().Add(time.Hour), 10)
			e.isCode(err, db.ECodeNotFound)
			e.Assert(e.session("one"), qt.IsNil)
		}},
		{"an operator keeps its newest sessions", func(e *env) {
			e.withOperator()
			for _, token := range []string{"a", "b", "c", "d"} {
				e.newSession(token, time.Hour, 3)
				e.advance(time.Millisecond)
			}
			e.Assert(e.session("a"), qt.IsNil)
			for _, token := range []string{"b", "c", "d"} {
				e.Assert(e.session(token), qt.IsNotNil, qt.Commentf("session %s", token))
			}
			// Made at one instant, the one just made is kept whatever its hash.
			for _, token := range []string{"e", "f", "g", "h", "i"} {
				e.newSession(token, time.Hour, 3)
				e.Assert(e.session(token), qt.IsNotNil, qt.Commentf("session %s", token))
			}
			live := 0
			for _, token := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
				if e.session(token) != nil {
					live++
				}
			}
			e.Assert(live, qt.Equals, 3)
		}},
		{"a new password ends the operator's sessions", func(e *env) {
			e.withOperator()
			e.newSession("one", time.Hour, 10)
			e.Assert(e.st.SetOperatorPasswordHash(e.ctx, "admin", []byte("another"), "password_set"), qt.IsNil)
			e.Assert(e.session("one"), qt.IsNil)
			e.newSession("two", time.Hour, 10)
			e.Assert(e.session("two"), qt.IsNotNil)
		}},
		{"login attempts at once each see their own count", func(e *env) {
			const n = 20
			got := make([]int, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					t, err := e.st.CountLoginAttempt(e.ctx, guesser, time.Minute)
					e.Check(err, qt.IsNil)
					got[i] = t.Pending
				})
			}
			wg.Wait()
			sort.Ints(got)
			for i, p := range got {
				e.Assert(p, qt.Equals, i+1)
			}
			e.Assert(e.countAttempt("198.51.100.0/24").Pending, qt.Equals, 1) // another client's own
		}},
		{"a wrong password counts, a right one clears, an unchecked one is given back", func(e *env) {
			e.attempt(guesser, db.LoginWrongPassword)
			e.advance(time.Second)
			e.attempt(guesser, db.LoginUnchecked)
			t := e.attempt(guesser, db.LoginWrongPassword)
			e.Assert(t, qt.DeepEquals, db.LoginTries{Pending: 1, Failed: 1, LastFail: start()})
			t = e.attempt(guesser, db.LoginRightPassword)
			e.Assert(t, qt.DeepEquals, db.LoginTries{Pending: 1, Failed: 2, LastFail: start().Add(time.Second)})
			e.Assert(e.countAttempt(guesser), qt.DeepEquals, db.LoginTries{Pending: 1})
		}},
		{"of refusals with one mark, one reports it", func(e *env) {
			const n = 10
			for range n {
				e.countAttempt(guesser)
			}
			reports := make(chan bool, n)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					report, err := e.st.RefuseLoginAttempt(e.ctx, guesser, 6)
					e.Check(err, qt.IsNil)
					reports <- report
				})
			}
			wg.Wait()
			close(reports)
			reported := 0
			for r := range reports {
				if r {
					reported++
				}
			}
			e.Assert(reported, qt.Equals, 1)
			e.Assert(e.countAttempt(guesser), qt.DeepEquals, db.LoginTries{Pending: 1, Reported: 6})
			report, err := e.st.RefuseLoginAttempt(e.ctx, guesser, 7)
			e.Assert(err, qt.IsNil)
			e.Assert(report, qt.IsTrue)
		}},
		{"attempts of a client quiet for long are presumed lost", func(e *env) {
			e.countAttempt(guesser)
			e.countAttempt(guesser)
			e.advance(time.Minute - time.Millisecond)
			e.Assert(e.countAttempt(guesser).Pending, qt.Equals, 3)
			e.advance(time.Minute + time.Millisecond)
			e.Assert(e.countAttempt(guesser).Pending, qt.Equals, 1)
		}},
		{"failures are forgotten unless one came since", func(e *env) {
			e.attempt(guesser, db.LoginWrongPassword)
			seen := e.attempt(guesser, db.LoginWrongPassword)
			e.Assert(seen.Failed, qt.Equals, 1)
			e.Assert(e.st.ForgetLoginTries(e.ctx, guesser, seen), qt.IsNil) // one more came since
			e.Assert(e.countAttempt(guesser).Failed, qt.Equals, 2)
			e.Assert(e.st.FinishLoginAttempt(e.ctx, guesser, db.LoginUnchecked), qt.IsNil)
			seen = e.countAttempt(guesser)
			e.Assert(e.st.ForgetLoginTries(e.ctx, guesser, seen), qt.IsNil)
			e.Assert(e.countAttempt(guesser), qt.DeepEquals, db.LoginTries{Pending: 2})
		}},
		{"clients idle for long are pruned", func(e *env) {
			e.attempt(guesser, db.LoginWrongPassword)
			e.advance(time.Hour)
			e.attempt("192.0.2.2/32", db.LoginWrongPassword)
			e.Assert(e.st.PruneLoginTries(e.ctx, 30*time.Minute), qt.IsNil)
			e.Assert(e.countAttempt(guesser).Failed, qt.Equals, 0)
			e.Assert(e.countAttempt("192.0.2.2/32").Failed, qt.Equals, 1)
		}},
	}
}
