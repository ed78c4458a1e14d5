package db

import (
	"sync/atomic"
	"time"
)

// Clock is the time every rule reads through the store's Now: the system's, moved forward
// by the test controls (extensions section 6, POST /_inboxd/clock) so that a test sees a
// download link or a key expire, a send window roll over or a month end without waiting.
// One Clock is passed to the store and the server; nothing else in a process keeps an
// offset. The offset of record is in the database (ControlState), shared by every process
// of it; each process copies it here whenever it changes (package mail), so that reading
// the time costs no round trip.
type Clock struct {
	offset atomic.Int64 // nanoseconds ahead of the system clock
	moved  Signal       // fired when the offset changes
}

// Now is the system time plus the offset.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Set puts the clock d ahead of the system's.
func (c *Clock) Set(d time.Duration) {
	if c.offset.Swap(int64(d)) != int64(d) {
		c.moved.Fire()
	}
}

// Advance moves this clock forward by d, and no other process's: for a test of one
// component; the test controls move the shared offset instead.
func (c *Clock) Advance(d time.Duration) {
	c.offset.Add(int64(d))
	c.moved.Fire()
}

// Moved returns a channel closed once the offset next changes, after the change: a
// worker asleep until a time of this clock (a retry's) wakes then to see what came due,
// rather than sleep out the time the clock skipped.
func (c *Clock) Moved() <-chan struct{} { return c.moved.Wait() }
