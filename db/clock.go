package db

import (
	"sync/atomic"
	"time"
)

// Clock is the time every rule reads through the store's Now: the system's, moved forward
// by the test controls (extensions section 6, POST /_inboxd/clock) so that a test sees a
// download link or a key expire, a send window roll over or a month end without waiting.
// One Clock is passed to the store and the server; nothing else keeps an offset.
type Clock struct {
	offset atomic.Int64 // nanoseconds ahead of the system clock
}

// Now is the system time plus the offset.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Rewind takes the clock back to the system's time.
func (c *Clock) Rewind() { c.offset.Store(0) }
