package server

import (
	"fmt"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// The throttle's rule on the tries the store returns with an attempt counted: which
// attempts go ahead, how long the others wait, and that a wait keeps one mark while the
// checks pending when it began finish wrong (one audit row per wait, whichever process
// refuses).
func TestThrottleJudge(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tries := func(pending, failed int) db.LoginTries {
		c := db.LoginTries{Pending: pending, Failed: failed}
		if failed > 0 {
			c.LastFail = at
		}
		return c
	}
	for _, tc := range []struct {
		c    db.LoginTries
		now  time.Time
		want refusal
	}{
		{tries(1, 0), at, refusal{}},
		{tries(5, 0), at, refusal{}},
		{tries(6, 0), at, refusal{wait: time.Minute, mark: 6}},
		{tries(3, 2), at, refusal{}},
		{tries(4, 2), at, refusal{wait: time.Minute, mark: 6}},
		// The fourth wrong password finished a moment ago: the fifth try is still free.
		{tries(1, 4), at, refusal{}},
		{tries(1, 5), at, refusal{wait: time.Minute, mark: 6}},
		{tries(1, 5), at.Add(time.Second), refusal{wait: time.Minute - time.Second, mark: 6}},
		{tries(1, 5), at.Add(time.Minute), refusal{}},
		{tries(2, 5), at.Add(time.Minute), refusal{wait: 2 * time.Minute, mark: 7}},
		{tries(1, 6), at.Add(30 * time.Second), refusal{wait: 90 * time.Second, mark: 7}},
		{tries(1, 30), at, refusal{wait: time.Hour, mark: 31}},
	} {
		qt.Check(t, judge(tc.c, tc.now), qt.Equals, tc.want, qt.Commentf("%+v at %v", tc.c, tc.now.Sub(at)))
	}
}

// Failures are forgotten 15 minutes after the wait they earned is over.
func TestThrottleForgets(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		failed int
		after  time.Duration
		want   bool
	}{
		{0, 24 * time.Hour, false},
		{1, 15*time.Minute - time.Millisecond, false},
		{1, 15 * time.Minute, true},
		{5, 16*time.Minute - time.Millisecond, false},
		{5, 16 * time.Minute, true},
		{7, 19 * time.Minute, true},
		{40, time.Hour + 15*time.Minute, true},
	} {
		c := db.LoginTries{Pending: 1, Failed: tc.failed, LastFail: at}
		qt.Check(t, forgotten(c, at.Add(tc.after)), qt.Equals, tc.want, qt.Commentf(fmt.Sprint(tc)))
	}
}
