package db

import "time"

// SinceQuery chooses an inbox's messages from a moment on, oldest first: what a wait for
// mail (extensions section 5) reads when it first looks and when something changed.
type SinceQuery struct {
	// Since: only messages whose timestamp is at or after it.
	Since time.Time
	// After resumes a read past this message (nil: from Since).
	After *MessageKey
	// Rows, when not nil, limits the read to these messages (by row id).
	Rows []int64
	// Limit bounds how many messages one read returns.
	Limit int
}

// MessageKey is a message's place in time order: its timestamp, then its row id.
type MessageKey struct {
	Timestamp time.Time
	ID        int64
}

// KeyOf returns m's place in time order.
func KeyOf(m *Message) MessageKey { return MessageKey{Timestamp: m.Timestamp.Time, ID: m.ID} }

// Before reports whether k comes before o in time order.
func (k MessageKey) Before(o MessageKey) bool {
	if !k.Timestamp.Equal(o.Timestamp) {
		return k.Timestamp.Before(o.Timestamp)
	}
	return k.ID < o.ID
}
