package events

import (
	"context"
	"sort"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/search"
)

// WaitRequest is a wait for mail (extensions section 5).
type WaitRequest struct {
	Inbox *db.Inbox
	// Filter holds the labels every match has (listMessages' rules for trash and
	// quarantine follow from them).
	Filter db.MessageFilter
	// Query, when not "", is a search every match passes (searchMessages' language).
	Query   string
	Since   time.Time
	Count   int
	Timeout time.Duration
	// Stop, when closed, answers the wait at once as at its timeout (the server shuts
	// down).
	Stop <-chan struct{}
}

// WaitResult is a wait's answer: the Count oldest matches, oldest first, or at the
// timeout what matched by then.
type WaitResult struct {
	Messages []db.Message
	TimedOut bool
}

// scanPage is how many candidates one read of the first look takes.
const scanPage = 100

// Wait answers as soon as req.Count messages match, or at req.Timeout with what matched.
//
// It subscribes to the inbox's events first, then looks at the inbox once from
// req.Since; after that only a change can make a difference, and every change of a
// message is an event of its inbox (a new message, a label change, a release, a delivery
// update). So each wake re-checks only the messages the new events name and the matches
// so far: at most Count plus a page of events, however large the inbox. No timer but the
// timeout, no polling.
func (h *Hub) Wait(ctx context.Context, req WaitRequest) (WaitResult, error) {
	deadline := time.NewTimer(req.Timeout)
	defer deadline.Stop()
	sub := h.subscribe(db.EventFilter{AccountID: req.Inbox.AccountID, Inboxes: []int64{req.Inbox.ID}}, -1, false)
	defer sub.Close()
	w := newWaiter(h.store, req)
	if err := w.scan(ctx, time.Now().Add(req.Timeout)); err != nil {
		return WaitResult{}, err
	}
	for !w.done() {
		select {
		case <-sub.C():
			if err := w.follow(ctx, sub, h.opts.Page); err != nil {
				return WaitResult{}, err
			}
		case <-deadline.C:
			return w.timedOut(ctx)
		case <-req.Stop:
			return w.timedOut(ctx)
		case <-ctx.Done():
			return WaitResult{}, ctx.Err()
		}
	}
	return WaitResult{Messages: w.answer()}, nil
}

// timedOut is the answer at the timeout: what matches now (a match may have gone since).
func (w *waiter) timedOut(ctx context.Context) (WaitResult, error) {
	if err := w.recheck(ctx, nil); err != nil {
		return WaitResult{}, err
	}
	return WaitResult{Messages: w.answer(), TimedOut: !w.done()}, nil
}

// waiter is one wait's view of its inbox.
type waiter struct {
	store   Store
	req     WaitRequest
	query   *search.Query        // nil: no query
	matched map[int64]db.Message // the matches so far, by row
	passes  map[int64]bool       // query verdicts: a message's text never changes
}

func newWaiter(store Store, req WaitRequest) *waiter {
	w := &waiter{store: store, req: req, matched: map[int64]db.Message{}, passes: map[int64]bool{}}
	if req.Query != "" {
		q := search.Parse(req.Query)
		w.query = &q
	}
	return w
}

func (w *waiter) done() bool { return len(w.matched) >= w.req.Count }

// scan is the first look: the candidates from Since on, oldest first, until Count match
// or, in an inbox large enough to take that long, until the wait's timeout (which then
// answers with what matched so far).
func (w *waiter) scan(ctx context.Context, until time.Time) error {
	q := db.SinceQuery{Since: w.req.Since, Limit: scanPage}
	if w.query == nil {
		q.Limit = w.req.Count // every candidate matches
	}
	for {
		page, err := w.store.MessagesSince(ctx, w.req.Inbox.ID, w.req.Filter, q)
		if err != nil {
			return err
		}
		if err := w.add(ctx, page); err != nil {
			return err
		}
		if w.done() || len(page) < q.Limit || !time.Now().Before(until) {
			return nil
		}
		last := db.KeyOf(&page[len(page)-1])
		q.After = &last
	}
}

// follow reads the events that woke the wait and re-checks the messages they name.
func (w *waiter) follow(ctx context.Context, sub *Sub, page int) error {
	for !w.done() {
		items, err := sub.Next(ctx, page)
		if err != nil || len(items) == 0 {
			return err
		}
		rows := make([]int64, len(items))
		for i, it := range items {
			rows[i] = it.MessageRow
		}
		if err := w.recheck(ctx, rows); err != nil {
			return err
		}
	}
	return nil
}

// recheck reads the matches so far and the changed messages again: a match may have
// been trashed, a changed message may match now.
func (w *waiter) recheck(ctx context.Context, changed []int64) error {
	rows := append([]int64(nil), changed...)
	for id := range w.matched {
		rows = append(rows, id)
	}
	if len(rows) == 0 {
		return nil
	}
	msgs, err := w.store.MessagesSince(ctx, w.req.Inbox.ID, w.req.Filter, db.SinceQuery{Since: w.req.Since, Rows: rows, Limit: len(rows)})
	if err != nil {
		return err
	}
	w.matched = map[int64]db.Message{}
	return w.add(ctx, msgs)
}

// add keeps the candidates that pass the query.
func (w *waiter) add(ctx context.Context, candidates []db.Message) error {
	if err := w.judge(ctx, candidates); err != nil {
		return err
	}
	for _, m := range candidates {
		if w.query == nil || w.passes[m.ID] {
			w.matched[m.ID] = m
		}
	}
	return nil
}

// judge evaluates the query on the candidates not judged before, in memory, on the text
// the index would hold. A message search cannot see (trashed, quarantined) passes no
// query, as in searchMessages; it is not remembered, since that can change.
func (w *waiter) judge(ctx context.Context, candidates []db.Message) error {
	if w.query == nil {
		return nil
	}
	var ids []int64
	for _, m := range candidates {
		if _, ok := w.passes[m.ID]; !ok {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	docs, err := w.store.IndexDocs(ctx, ids)
	if err != nil {
		return err
	}
	for _, d := range docs {
		doc := search.Doc(d)
		w.passes[d.ID] = w.query.Matches(&doc)
	}
	return nil
}

// answer is the Count oldest matches, oldest first.
func (w *waiter) answer() []db.Message {
	out := make([]db.Message, 0, len(w.matched))
	for _, m := range w.matched {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return db.KeyOf(&out[i]).Before(db.KeyOf(&out[j])) })
	if len(out) > w.req.Count {
		out = out[:w.req.Count]
	}
	return out
}
