package events

import (
	"context"

	"github.com/inboxd/inboxd/db"
)

// Sub is a subscription: the events of one account that pass a filter, from a cursor on.
// One goroutine reads it (Next); the hub only wakes it.
type Sub struct {
	h      *Hub
	filter db.EventFilter
	// payloads: the subscriber reads events with their payloads (a stream); a wait needs
	// only which messages changed. The hub renders payloads for an account only while
	// such a subscriber follows it.
	payloads bool
	wake     chan struct{} // 1-buffered: a wake while one is pending is the same wake
	cursor   int64
}

// Subscribe subscribes to the events that pass f (its AccountID is required) after the
// cursor after; a negative cursor is the hub's end (Last), so only new events come.
// Close it when done.
func (h *Hub) Subscribe(f db.EventFilter, after int64) *Sub {
	return h.subscribe(f, after, true)
}

func (h *Hub) subscribe(f db.EventFilter, after int64, payloads bool) *Sub {
	s := &Sub{h: h, filter: f, payloads: payloads, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	s.cursor = after
	if after < 0 {
		s.cursor = h.last
	}
	set := h.subs[f.AccountID]
	if set == nil {
		set = map[*Sub]struct{}{}
		h.subs[f.AccountID] = set
	}
	set[s] = struct{}{}
	if s.cursor < h.last {
		s.notify() // there may be something to read already
	}
	return s
}

// notify wakes the subscriber without ever blocking the hub.
func (s *Sub) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// C is where the subscription is woken: something may have arrived since Next last
// returned nothing.
func (s *Sub) C() <-chan struct{} { return s.wake }

// Cursor is the seq the subscription has read through.
func (s *Sub) Cursor() int64 { return s.cursor }

// Next returns up to max events after the cursor and moves the cursor past them; none
// means caught up (wait on C). From the ring when it still holds the cursor's place,
// otherwise from the store, until the cursor reaches the ring.
func (s *Sub) Next(ctx context.Context, max int) ([]*Item, error) {
	items, through, ok := s.h.fromRing(s.cursor, s.filter, max)
	if !ok {
		return s.fromStore(ctx, max)
	}
	if s.payloads {
		var err error
		if items, err = s.completed(ctx, items); err != nil {
			return nil, err
		}
	}
	s.cursor = through
	return items, nil
}

// completed renders the payloads the hub left out (nobody streamed the account when it
// read them), into items of the subscriber's own: the ring's are shared.
func (s *Sub) completed(ctx context.Context, items []*Item) ([]*Item, error) {
	var missing []db.Event
	for _, it := range items {
		if it.Data == nil {
			missing = append(missing, it.Event)
		}
	}
	if len(missing) == 0 {
		return items, nil
	}
	rendered, err := render(ctx, s.h.store, missing)
	if err != nil {
		return nil, err
	}
	out := make([]*Item, len(items))
	for i, it := range items {
		if it.Data == nil {
			it, rendered = rendered[0], rendered[1:]
		}
		out[i] = it
	}
	return out, nil
}

// fromStore reads past the ring's floor from the store. Every event at or below the
// floor was committed before the read (the hub read it), so when the store has no more
// events for the filter, the cursor may jump to the floor.
func (s *Sub) fromStore(ctx context.Context, max int) ([]*Item, error) {
	s.h.mu.Lock()
	floor := s.h.floor
	s.h.mu.Unlock()
	evs, err := s.h.store.Events(ctx, s.cursor, s.filter, max)
	if err != nil {
		return nil, err
	}
	if len(evs) > 0 {
		s.cursor = evs[len(evs)-1].Seq
	}
	if len(evs) < max {
		s.cursor = max64(s.cursor, floor)
	}
	if len(evs) == 0 {
		return s.Next(ctx, max) // the ring holds the cursor's place now
	}
	if !s.payloads {
		return bare(evs), nil
	}
	return render(ctx, s.h.store, evs)
}

// Close ends the subscription.
func (s *Sub) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	set := s.h.subs[s.filter.AccountID]
	delete(set, s)
	if len(set) == 0 {
		delete(s.h.subs, s.filter.AccountID)
	}
}
