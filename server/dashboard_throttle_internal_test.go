package server

import (
	"net/netip"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// An attempt whose time was read a moment before a concurrent wrong password finished
// (the handler reads the clock before the throttle's lock) still has its tries left: it
// is not told to wait a second. (The login flood test met this now and then.)
func TestThrottleAttemptReadBeforeAFailure(t *testing.T) {
	th := throttle{clients: map[netip.Prefix]*tries{}}
	key := clientKey(netip.MustParseAddr("192.0.2.1"))
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	for range loginFreeTries - 1 {
		qt.Assert(t, th.reserve(key, at), qt.Equals, refusal{})
		th.finish(key, wrongPassword, at)
	}
	qt.Assert(t, th.reserve(key, at.Add(-time.Millisecond)), qt.Equals, refusal{})
	th.finish(key, wrongPassword, at)
	qt.Assert(t, th.reserve(key, at.Add(time.Second)).wait, qt.Equals, loginFirstWait-time.Second)
}
