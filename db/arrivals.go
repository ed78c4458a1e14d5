package db

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Arrivals are the messages this process's units of work stored a moment ago, by the id
// of the event that names each (NewEvent.Message), so that the event's payload is
// rendered from what the receive pipeline had in hand instead of reading the message
// back with its bodies (EventMessagesOf). Keyed by event id, an entry is only ever found
// for an event that committed: the id of a unit that rolled back never reaches the log.
// Other processes sharing the store read their payloads from it, as before.
//
// Each store keeps one, and its AppendEvent puts the event's message in it.
type Arrivals struct {
	mu    sync.Mutex
	byID  map[string]*Message
	order []string // event ids, oldest first, from order[head]
	head  int
	bytes int
}

// Bounds of Arrivals: what a payload needs within a moment of its commit (the hub reads
// the log every 10 ms while mail flows; 256 messages are 170 ms of mail at 1,500 msg/s),
// not a cache of the mailbox: every byte kept is live heap under serve's soft memory
// limit (runtime.go), beside the hub's ring of payloads. A message with larger bodies is
// read back.
const (
	arrivalsMax       = 256
	arrivalsBytes     = 2 << 20
	arrivalsPerMsgMax = 256 << 10
)

// Put keeps m as the message of event id (nil: nothing).
func (a *Arrivals) Put(id string, m *Message) {
	if m == nil || arrivalSize(m) > arrivalsPerMsgMax {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byID == nil {
		a.byID = map[string]*Message{}
	}
	a.byID[id] = m
	a.order = append(a.order, id)
	a.bytes += arrivalSize(m)
	for len(a.order)-a.head > arrivalsMax || a.bytes > arrivalsBytes {
		a.dropOldest()
	}
}

// dropOldest forgets the oldest entry. Call with a.mu.
func (a *Arrivals) dropOldest() {
	id := a.order[a.head]
	a.order[a.head] = ""
	a.head++
	if m, ok := a.byID[id]; ok {
		a.bytes -= arrivalSize(m)
		delete(a.byID, id)
	}
	if a.head > len(a.order)/2 { // the dropped half moves out, not on every drop
		a.order = slices.Clone(a.order[a.head:])
		a.head = 0
	}
}

// message returns the message of event e as its unit of work stored it, with the
// inbox's address the event names; nil when this process did not store it a moment ago.
func (a *Arrivals) message(e *Event) *Message {
	a.mu.Lock()
	m := a.byID[e.EventID]
	a.mu.Unlock()
	if m == nil {
		return nil
	}
	v := *m
	v.InboxID = e.InboxID
	return &v
}

func arrivalSize(m *Message) int { return len(m.BodyText) + len(m.BodyHTML) + 1024 }

// EventMessagesOf returns the messages the events evs name, by row id, for their
// payloads: those this process stored a moment ago as their units of work stored them,
// the others read from the log's store with their bodies (EventLog.EventMessages). A
// message deleted since it was read is absent.
//
// So a payload shows its message as stored at a moment between the event's commit and
// its rendering: the commit itself when this process made it, as the hosted service's
// events do (API-NOTES section 14: transactional with the commit).
func EventMessagesOf(ctx context.Context, log EventLog, evs []Event) (map[int64]*Message, error) {
	out := make(map[int64]*Message, len(evs))
	var rows []int64
	for i := range evs {
		if m := log.Arrivals().message(&evs[i]); m != nil {
			out[evs[i].MessageRow] = m
		} else {
			rows = append(rows, evs[i].MessageRow)
		}
	}
	if len(rows) == 0 {
		return out, nil
	}
	read, err := log.EventMessages(ctx, rows)
	if err != nil {
		return nil, err
	}
	for row, m := range read {
		out[row] = m
	}
	return out, nil
}

// storedView returns new message n as a store reads it back once StoreMessage wrote it
// (row, thread, and its triage unless withTriage is false), without the inbox's address
// (Arrivals fills it from the event): the columns the stores write, decoded as their reads
// decode them. The stores' contract suite checks it against GetMessage ("an event's
// message is what getMessage shows"), so the two cannot drift apart unnoticed. Nil for a
// message with attachments: their ids are the store's, so it is read back.
//
// The view shares n's triage and protection: a stored NewMessage is not changed after.
func (n *NewMessage) storedView(row int64, thread ThreadRef, withTriage bool) *Message {
	if len(n.Attachments) > 0 {
		return nil
	}
	m := &Message{
		ID: row, InboxRowID: n.InboxID, ThreadRowID: thread.Row,
		MessageID: n.MessageID, ThreadID: thread.UUID,
		Direction: n.Direction, Quarantined: n.Quarantined(),
		From: n.From, To: nonNil(n.To), Cc: nonNil(n.Cc), Bcc: nonNil(n.Bcc), ReplyTo: nonNil(n.ReplyTo),
		Subject: n.Subject, Preview: n.Preview,
		Timestamp:   Time{time.UnixMilli(n.Timestamp.UnixMilli()).UTC()}, // stored in milliseconds
		Labels:      sortedSet(n.Labels),
		Attachments: []AttachmentSummary{},
		Protection:  n.Protection, Delivery: n.Delivery,
		InReplyTo: n.InReplyTo, References: nonNil(n.References),
		BodyText: n.Text, BodyHTML: n.HTML,
	}
	if withTriage {
		m.Triage = n.Triage
	}
	return m
}

// sortedSet returns the distinct strings of s in byte order, as the stores read labels.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return nonNil(slices.Compact(out))
}
