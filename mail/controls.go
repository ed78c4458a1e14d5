package mail

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Controls keep a process's fault rules (Faults) and clock (db.Clock) in step with the
// test controls' state in the database (db.ControlState), which every process of it
// shares (extensions section 9). A change made through Controls is applied here at once;
// one made by another process is applied when the store says it committed
// (ControlsChanged: on PostgreSQL within the time a notification takes, as a revoked key
// is refused). The hot paths read only memory: the clock an atomic offset, the rules
// their copy in Faults; only a firing of a rule with times takes a round trip, to count
// it in the database so that times holds across processes.
type Controls struct {
	store  db.Store
	clock  *db.Clock
	faults *Faults
	log    *slog.Logger

	mu      sync.Mutex
	version int64 // of the state applied last (db.ControlState.Version)

	stop context.CancelFunc
	done chan struct{}
}

// controlsTimeout bounds a read or change of the state made outside a request: the first
// read, and the counting of a firing (a fault decision in an SMTP stage or a delivery has
// no request of its own).
const controlsTimeout = 10 * time.Second

// controlsRetry is how long following waits before reading a state it could not read.
const controlsRetry = 200 * time.Millisecond

// NewControls applies the state in store to clock and faults, and follows its changes
// until Close. Firings of faults' rules with times are counted in store from then on.
func NewControls(store db.Store, clock *db.Clock, faults *Faults, log *slog.Logger) (*Controls, error) {
	c := &Controls{store: store, clock: clock, faults: faults, log: log, version: -1}
	faults.mu.Lock()
	faults.controls = c
	faults.mu.Unlock()
	changed := store.ControlsChanged() // before the read: a change after it is not missed
	ctx, cancel := context.WithTimeout(context.Background(), controlsTimeout)
	defer cancel()
	if err := c.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("test controls: %w", err)
	}
	follow, stop := context.WithCancel(context.Background())
	c.stop, c.done = stop, make(chan struct{})
	go c.follow(follow, changed)
	return c, nil
}

// Close stops following the state.
func (c *Controls) Close() {
	c.stop()
	<-c.done
}

// ClearControls takes every process's fault rules away and their clock back to the
// system's: a reset, and a server starting with the test controls (as it empties the
// outbox, so that it starts from a clean state, as a restart did when each process kept
// its own).
func ClearControls(ctx context.Context, store db.Store) (*db.ControlState, error) {
	return store.UpdateControls(ctx, func(s *db.ControlState) bool { s.Clear(); return true })
}

// Reset is ClearControls, applied here at once.
func (c *Controls) Reset(ctx context.Context) error {
	st, err := ClearControls(ctx, c.store)
	if err != nil {
		return err
	}
	return c.apply(st)
}

// SetFaults replaces the fault rules of every process (CheckFaultRules first).
func (c *Controls) SetFaults(ctx context.Context, rules []FaultRule) error {
	stored := make([]json.RawMessage, len(rules))
	for i, r := range rules {
		var err error
		if stored[i], err = json.Marshal(r); err != nil {
			return err
		}
	}
	return c.update(ctx, func(s *db.ControlState) bool { s.SetRules(stored); return true })
}

// AdvanceClock moves every process's clock forward by d. Event retention reads that
// clock: the events it now leaves behind are dropped at once, not at the event hubs'
// next hourly trim, so that a stream resumed among them is cursor_expired at once, as
// after the days themselves.
func (c *Controls) AdvanceClock(ctx context.Context, d time.Duration) error {
	if err := c.update(ctx, func(s *db.ControlState) bool { s.AdvanceClock(d); return true }); err != nil {
		return err
	}
	_, err := c.store.TrimEvents(ctx, c.store.Now().Add(-db.EventRetention))
	return err
}

// Refresh reads the state and applies it: before an answer that shows it (getFaults,
// getClock), so that it agrees with a change another process has just made.
func (c *Controls) Refresh(ctx context.Context) error {
	st, err := c.store.Controls(ctx)
	if err != nil {
		return err
	}
	return c.apply(st)
}

// update changes the state with fn and applies the result.
func (c *Controls) update(ctx context.Context, fn func(*db.ControlState) bool) error {
	st, err := c.store.UpdateControls(ctx, fn)
	if err != nil {
		return err
	}
	return c.apply(st)
}

// spend counts a firing of rule i (of the rules set at version set, which may fire times
// in all) and reports whether it may fire: not when another firing, here or on another
// process, spent it first, nor when the count cannot be made.
func (c *Controls) spend(set int64, i, times int) bool {
	if c == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlsTimeout)
	defer cancel()
	spent := false
	st, err := c.store.UpdateControls(ctx, func(s *db.ControlState) bool {
		spent = s.SpendFault(set, i, times)
		return spent
	})
	if err != nil {
		c.log.Warn("a fault rule's firing could not be counted, so it does not fire", "err", err)
		return false
	}
	if err := c.apply(st); err != nil {
		c.log.Warn("the test controls' state is unreadable", "err", err)
	}
	return spent
}

// apply puts st in force in this process, unless the state in force is as new.
func (c *Controls) apply(st *db.ControlState) error {
	rules := make([]FaultRule, len(st.Rules))
	for i, raw := range st.Rules {
		if err := json.Unmarshal(raw, &rules[i]); err != nil {
			return fmt.Errorf("test controls: fault rule %d: %w", i, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Version <= c.version {
		return nil
	}
	c.version = st.Version
	c.clock.Set(st.ClockOffset)
	c.faults.load(st.RulesSet, rules, st.Fired)
	return nil
}

// follow applies the state each time the store says it changed (changed), until ctx ends.
func (c *Controls) follow(ctx context.Context, changed <-chan struct{}) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = c.store.ControlsChanged()
		for {
			err := c.Refresh(ctx)
			if err == nil || ctx.Err() != nil {
				break
			}
			c.log.Warn("the test controls' state could not be read; trying again", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(controlsRetry):
			}
		}
	}
}
