package events

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Store is what the hub reads: the event log and the store's clock, and for waits the
// messages and their searchable text. A db.Store is one.
type Store interface {
	db.EventLog
	Now() time.Time
	MessagesSince(ctx context.Context, inboxID int64, f db.MessageFilter, q db.SinceQuery) ([]db.Message, error)
	IndexDocs(ctx context.Context, ids []int64) ([]db.IndexDoc, error)
}

// Options tune a Hub; the zero value is the default everywhere.
type Options struct {
	// RingEvents and RingBytes bound the ring of recent events (default 1,024 events and
	// 4 MiB of payloads; a payload may carry 64 KiB of text). The ring serves streams a
	// moment behind the hub (a page is 25 ms) and streams that reconnect at once; one
	// further behind reads the store. Every byte it keeps is live heap under serve's soft
	// memory limit, which the collector then runs more often to keep: with 4,096 events
	// (about 11 MB of 2 KB mail) a server with ten streams collected 60% more often per
	// message than one without (BENCHMARKS.md, Events, "fifth pass").
	RingEvents int
	RingBytes  int
	// Page is how many events one read of the log returns (default 200).
	Page int
	// TrimEvery is how often the hub drops events older than db.EventRetention (default
	// an hour).
	TrimEvery time.Duration
	// Retry is how long the tailer waits after a failed read (default a second).
	Retry time.Duration
	// Gather is the least time between two reads of the log (default 10 ms): while mail
	// flows, one read, one rendering and one wake of each stream carry the events of
	// several commits instead of one. The first event after a quiet spell is read at once.
	Gather time.Duration
	Log    *slog.Logger // nil: slog.Default()
}

func (o Options) withDefaults() Options {
	if o.RingEvents <= 0 {
		o.RingEvents = 1024
	}
	if o.RingBytes <= 0 {
		o.RingBytes = 4 << 20
	}
	if o.Page <= 0 {
		o.Page = 200
	}
	if o.TrimEvery <= 0 {
		o.TrimEvery = time.Hour
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.Gather <= 0 {
		o.Gather = 10 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Item is an event of the log with its payload as the stream carries it (nil for a
// subscriber that asked for none). Items are never changed once made: the ring shares them.
type Item struct {
	db.Event
	Data []byte
}

// Hub follows the event log for the subscribers of one process.
type Hub struct {
	store Store
	opts  Options

	mu sync.Mutex
	// ring holds every event with a seq in (floor, last], oldest first.
	ring  []*Item
	bytes int
	floor int64
	last  int64
	subs  map[string]map[*Sub]struct{} // by account
	// ahead holds payloads rendered for the webhook worker (Payloads) of events the hub
	// has not read yet, by seq, until it reads them: a delivery handed over at commit is
	// rendered before the hub's next read, which then takes its payload instead of
	// rendering it again.
	ahead map[int64][]byte
}

// aheadMax bounds the payloads kept ahead of the hub's reads: a few reads' worth.
const aheadMax = 1024

// New returns a hub that starts at the end of the log: Run follows it from there.
func New(ctx context.Context, store Store, opts Options) (*Hub, error) {
	last, _, err := store.EventBounds(ctx)
	if err != nil {
		return nil, err
	}
	return &Hub{store: store, opts: opts.withDefaults(), floor: last, last: last, subs: map[string]map[*Sub]struct{}{},
		ahead: map[int64][]byte{}}, nil
}

// Forget drops the events the hub holds, so that a reader behind reads them from the
// store: after the test controls' reset, which takes events out of the log again.
func (h *Hub) Forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring, h.bytes, h.floor = nil, 0, h.last
	clear(h.ahead)
}

// Run tails the log and trims it until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	trim := time.NewTicker(h.opts.TrimEvery)
	defer trim.Stop()
	h.trim(ctx)
	for {
		woken := h.store.EventsCommitted() // before reading: nothing committed in between is missed
		read := time.Now()
		if err := h.catchUp(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			h.opts.Log.Error("event hub: reading the event log", "err", err)
			woken = retryAfter(h.opts.Retry)
		}
		select {
		case <-woken:
			if !sleep(ctx, h.opts.Gather-time.Since(read)) {
				return
			}
		case <-trim.C:
			h.trim(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// sleep waits d (nothing when d <= 0); false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryAfter is a channel closed after d.
func retryAfter(d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(d, func() { close(ch) })
	return ch
}

// trim drops the events retention no longer keeps, by the store's clock.
func (h *Hub) trim(ctx context.Context) {
	if _, err := h.store.TrimEvents(ctx, h.store.Now().Add(-db.EventRetention)); err != nil && ctx.Err() == nil {
		h.opts.Log.Error("event hub: trimming the event log", "err", err)
	}
}

// catchUp reads what was appended since the hub's last event, page by page, and hands it
// to the subscribers.
func (h *Hub) catchUp(ctx context.Context) error {
	for {
		evs, err := h.store.Events(ctx, h.last, db.EventFilter{}, h.opts.Page) // only Run writes h.last
		if err != nil || len(evs) == 0 {
			return err
		}
		items, err := h.prepare(ctx, evs)
		if err != nil {
			return err
		}
		h.publish(items)
		if len(evs) < h.opts.Page {
			return nil
		}
	}
}

// prepare renders the payloads of the events that someone streams now; the others stay
// bare, so mail that nobody streams costs no extra read (a stream that later reads them
// from the ring renders them itself).
func (h *Hub) prepare(ctx context.Context, evs []db.Event) ([]*Item, error) {
	items := bare(evs)
	h.takeAhead(items)
	wanted := h.wanted(items)
	if len(wanted) == 0 {
		return items, nil
	}
	sel := make([]db.Event, len(wanted))
	for j, i := range wanted {
		sel[j] = evs[i]
	}
	rendered, err := render(ctx, h.store, sel)
	if err != nil {
		return nil, err
	}
	for j, i := range wanted {
		items[i] = rendered[j]
	}
	return items, nil
}

// takeAhead gives items the payloads rendered ahead of this read, and forgets them.
func (h *Hub) takeAhead(items []*Item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ahead) == 0 {
		return
	}
	for _, it := range items {
		if data, ok := h.ahead[it.Seq]; ok {
			it.Data = data
			delete(h.ahead, it.Seq)
		}
	}
}

// keepAhead keeps the payloads of items the hub has not read yet (ahead).
func (h *Hub) keepAhead(items []*Item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		if it.Seq > h.last && len(h.ahead) < aheadMax {
			h.ahead[it.Seq] = it.Data
		}
	}
}

// wanted returns the indexes of the items without a payload whose account someone
// streams.
func (h *Hub) wanted(items []*Item) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	streamed := map[string]bool{} // by account, looked up once a page
	for i, it := range items {
		if it.Data != nil {
			continue
		}
		a := it.AccountID
		yes, ok := streamed[a]
		if !ok {
			yes = h.streamed(a)
			streamed[a] = yes
		}
		if yes {
			out = append(out, i)
		}
	}
	return out
}

// streamed reports whether a subscriber of the account wants payloads. Call with h.mu.
func (h *Hub) streamed(account string) bool {
	for s := range h.subs[account] {
		if s.payloads {
			return true
		}
	}
	return false
}

// publish appends items to the ring and wakes the subscribers they concern.
func (h *Hub) publish(items []*Item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		h.ring = append(h.ring, it)
		h.bytes += len(it.Data)
	}
	h.last = items[len(items)-1].Seq
	for seq := range h.ahead { // an event read without its payload kept (Forget came between)
		if seq <= h.last {
			delete(h.ahead, seq)
		}
	}
	h.evict()
	for _, it := range items {
		for s := range h.subs[it.AccountID] {
			if s.filter.Matches(&it.Event) {
				s.notify()
			}
		}
	}
}

// evict drops the oldest events beyond the ring's bounds.
func (h *Hub) evict() {
	n := 0
	for n < len(h.ring) && (len(h.ring)-n > h.opts.RingEvents || h.bytes > h.opts.RingBytes) {
		h.bytes -= len(h.ring[n].Data)
		h.floor = h.ring[n].Seq
		n++
	}
	if n > 0 {
		// The dropped items are freed now; the rest moves to a fresh array when append
		// next needs room, not on every page (copying the whole ring each time).
		clear(h.ring[:n])
		h.ring = h.ring[n:]
	}
}

// fromRing returns up to max events of the ring after seq that pass f, and the seq up to
// which it looked; ok is false when the ring no longer holds every event after seq.
func (h *Hub) fromRing(after int64, f db.EventFilter, max int) (out []*Item, through int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if after < h.floor {
		return nil, after, false
	}
	through = max64(after, h.last)
	i := sort.Search(len(h.ring), func(i int) bool { return h.ring[i].Seq > after })
	for ; i < len(h.ring); i++ {
		if len(out) == max {
			return out, out[len(out)-1].Seq, true
		}
		if f.Matches(&h.ring[i].Event) {
			out = append(out, h.ring[i])
		}
	}
	return out, through, true
}

// rendered returns the payload the ring holds for seq: nil when the ring no longer or not
// yet holds seq, or holds it without a payload (nobody streamed its account then).
func (h *Hub) rendered(seq int64) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.ring), func(i int) bool { return h.ring[i].Seq >= seq })
	if i < len(h.ring) && h.ring[i].Seq == seq {
		return h.ring[i].Data
	}
	return nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// Last returns the newest seq the hub has read: a subscription from here gets every event
// committed later.
func (h *Hub) Last() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Subscribers returns how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, set := range h.subs {
		n += len(set)
	}
	return n
}
