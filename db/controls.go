package db

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// The test controls' fault rules and clock offset (extensions section 6) as a database
// keeps them for every process that serves it (section 9): one ControlState, which a
// store keeps as one record (the settings row ControlsSetting) and changes only through
// UpdateControls, in a transaction that no other change to it interleaves with. What a
// change does is written here, once for every store; package mail reads the rules and
// applies the state to each process's Clock and fault rules whenever a change commits
// (ControlsChanged), so that the hot paths read them from memory.

// ControlsSetting is the name of the settings row a store keeps the ControlState in. A
// reset of the test controls leaves settings alone: the state is cleared on its own.
const ControlsSetting = "test_controls"

// ControlState is the test controls' shared state. Version grows with every change, so
// that a process applies a state only when it is newer than the one it holds.
type ControlState struct {
	Version int64 `json:"version"`
	// RulesSet is the Version the rules were set at: a firing is counted against the
	// rules it was decided on, never against rules set since.
	RulesSet int64 `json:"rulesSet"`
	// Rules are the fault rules as set, each a JSON object package mail reads.
	Rules []json.RawMessage `json:"rules"`
	// Fired counts the firings of each rule that has a limit (its times).
	Fired []int `json:"fired"`
	// ClockOffset is how far the clock is ahead of the system's.
	ClockOffset time.Duration `json:"clockOffsetNs"`
}

// SetRules replaces the fault rules; none has fired yet.
func (c *ControlState) SetRules(rules []json.RawMessage) {
	c.RulesSet = c.Version + 1 // the version this change makes (ChangeControls)
	c.Rules = rules
	c.Fired = make([]int, len(rules))
}

// SpendFault counts a firing of rule i of the rules set at version set, unless they were
// replaced since or the rule has fired times already; it reports whether it counted.
func (c *ControlState) SpendFault(set int64, i, times int) bool {
	if set != c.RulesSet || i < 0 || i >= len(c.Fired) || c.Fired[i] >= times {
		return false
	}
	c.Fired[i]++
	return true
}

// AdvanceClock moves the clock forward by d.
func (c *ControlState) AdvanceClock(d time.Duration) { c.ClockOffset += d }

// Clear takes the rules away and the clock back to the system's: what a reset, or a
// server starting with the test controls, begins with.
func (c *ControlState) Clear() {
	c.SetRules(nil)
	c.ClockOffset = 0
}

// DecodeControls reads the state a store kept; nil is the state of a database that has
// never had one.
func DecodeControls(stored []byte) (*ControlState, error) {
	c := &ControlState{}
	if stored == nil {
		return c, nil
	}
	if err := json.Unmarshal(stored, c); err != nil {
		return nil, fmt.Errorf("db: the test controls' state: %w", err)
	}
	return c, nil
}

// ChangeControls is the one way a store changes the state it kept in stored: fn changes
// it and reports whether it did; if so, the version moves on and the new state is
// returned with what to keep (nil when nothing changed, and nothing is to be written).
func ChangeControls(stored []byte, fn func(*ControlState) bool) (*ControlState, []byte, error) {
	c, err := DecodeControls(stored)
	if err != nil {
		return nil, nil, err
	}
	if !fn(c) {
		return c, nil, nil
	}
	c.Version++
	out, err := json.Marshal(c)
	return c, out, err
}

// Signal wakes every goroutine waiting for something to happen (a commit, a
// notification); the zero value is ready.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns the channel the next Fire closes.
func (g *Signal) Wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
	return g.ch
}

// Fire wakes every waiter.
func (g *Signal) Fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}
