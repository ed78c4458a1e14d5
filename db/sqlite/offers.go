package sqlite

import (
	"database/sql"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Deliveries handed over at commit (db.Webhooks.OfferHookDeliveries). A unit of work that
// queues a webhook delivery asks this process's worker whether it has room for it; if so,
// the row is written leased to the worker (claimed_until and a token, as a claim would
// lease it) and, once the unit has committed, handed to the worker with its webhook and its
// event, so that the worker makes it without a claim: no read that picks it, no write that
// leases it, no read of its webhook and event. A delivery the worker had no room for is
// queued unleased and claimed, as before. Nothing else changes for the queue: a worker
// that dies leaves its rows leased until the lease ends, and then any worker claims them;
// an attempt is recorded only by the lease that made it.

// hookOffers holds the taker that deliveries are offered to, nil when none.
type hookOffers struct{ taker atomic.Pointer[takerRef] }

type takerRef struct{ db.HookTaker }

// OfferHookDeliveries offers the deliveries this store's units of work queue to t, until
// stop.
func (s *Store) OfferHookDeliveries(t db.HookTaker) (stop func(), ok bool) {
	ref := &takerRef{t}
	s.events.offers.taker.Store(ref)
	return func() { s.events.offers.taker.CompareAndSwap(ref, nil) }, true
}

// handoff is what one run of a unit of work leased to a taker: the rows of the webhooks
// it reserved room for, and the jobs queued in them.
type handoff struct {
	taker    db.HookTaker
	token    string
	reserved []int64
	jobs     []db.HookJob
}

// reserveHandoff asks the taker for room for a delivery to webhook w of event seq: the
// lease to record when it has room, the token that marks it, and the event (eventOf).
func (u *unit) reserveHandoff(w *db.Webhook, seq int64) (until int64, token any, ev db.Event, ok bool) {
	if u.offers == nil { // a write that cannot hand over: the taker claims it after the commit
		if ref := u.events.offers.taker.Load(); ref != nil {
			ref.Missed()
		}
		return 0, nil, ev, false
	}
	h := &u.handoff
	if h.taker == nil {
		ref := u.offers.taker.Load()
		if ref == nil {
			return 0, nil, ev, false
		}
		h.taker, h.token = ref.HookTaker, newRowUUID()
	}
	lease, ok := h.taker.Reserve(w.Row)
	if !ok {
		return 0, nil, ev, false
	}
	ev, err := u.eventOf(seq)
	if err != nil { // queued unleased, to be claimed
		h.taker.Cancel([]int64{w.Row})
		return 0, nil, ev, false
	}
	h.reserved = append(h.reserved, w.Row)
	return millis(u.now.Add(lease)), h.token, ev, true
}

// queuedHandoff notes what became of the room reserveHandoff reserved last: the delivery
// of ev that the insert res queued, or, when the insert failed (err), nothing.
func (u *unit) queuedHandoff(res sql.Result, w *db.Webhook, ev db.Event, until int64, err error) {
	h := &u.handoff
	var row int64
	if err == nil {
		row, err = res.LastInsertId() // never fails with SQLite
	}
	if err != nil {
		h.reserved = h.reserved[:len(h.reserved)-1]
		h.taker.Cancel([]int64{w.Row})
		return
	}
	h.jobs = append(h.jobs, db.HookJob{Row: row, Claim: h.token, LeaseEnds: time.UnixMilli(until),
		Webhook: *w, Event: ev, CreatedAt: db.FromMillis(millis(u.now)).Time})
}

// handOver gives the taker what the unit leased to it, once the unit has committed.
func (u *unit) handOver() {
	if h := &u.handoff; len(h.jobs) > 0 {
		h.taker.Take(h.jobs)
	}
	u.handoff = handoff{}
}

// cancelHandoff gives back the rooms the unit reserved: it rolled back, or its write runs
// again (write.go), and then reserves afresh.
func (u *unit) cancelHandoff() {
	h := &u.handoff
	if len(h.reserved) > 0 {
		h.taker.Cancel(h.reserved)
	}
	*h = handoff{}
}

// appendedEvent is an event a unit of work appended: what the store told of it, its id,
// and what the unit gave.
type appendedEvent struct {
	db.AppendedEvent
	id string
	e  db.NewEvent
}

// eventOf returns event seq as the log reads it (Events). The event of an arrival that
// the unit appended last, with the message as stored at hand (NewEvent.Message) and
// nothing more to tell (no delivery record, recipients or labels), is put together from
// what the unit has and the inbox's address, which never changes (kept in the inbox
// cache); any other is read back in the unit's transaction. Each statement costs about
// as much as the delivery's own row, so the common case reads none.
func (u *unit) eventOf(seq int64) (db.Event, error) {
	ap := &u.appended
	m, e := ap.e.Message, &ap.e
	if ap.Seq == seq && m != nil && e.Delivery == nil && e.Recipients == nil && e.Labels == nil {
		if addr, ok := u.inboxes.addressOf(ap.InboxRow); ok {
			return db.Event{Seq: seq, EventID: ap.id, AccountID: ap.AccountID, InboxRow: ap.InboxRow, InboxID: addr,
				Type: e.Type, OccurredAt: time.UnixMilli(millis(e.OccurredAt)).UTC(), MessageRow: e.MessageRow,
				MessageID: m.MessageID, ThreadID: m.ThreadID}, nil
		}
	}
	gen := u.inboxes.generation()
	ev, err := db.ScanEvent(u.tx.QueryRowContext(u.ctx, eventRows+" WHERE e.seq = +?", seq))
	if err == nil {
		u.inboxes.putAddress(ev.InboxRow, gen, ev.InboxID)
	}
	return ev, err
}
