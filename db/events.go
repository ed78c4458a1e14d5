package db

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"
)

// Events (extensions section 1): what happened to an account's mail, appended to a
// durable log in the unit of work that makes the change, so that a change that commits
// always has its events and one rolled back has none. Webhooks, the live stream and
// waits all read the log.

// Event types, in the order of the contract's table.
const (
	EventReceived        = "email.received"
	EventDeliveryUpdated = "email.delivery_updated"
	EventBounced         = "email.bounced"
	EventQuarantined     = "email.quarantined"
	EventReleased        = "email.released"
	EventLabelsUpdated   = "message.labels_updated"
)

// EventTypes returns every event type, in the contract's order.
func EventTypes() []string {
	return []string{EventReceived, EventDeliveryUpdated, EventBounced, EventQuarantined, EventReleased, EventLabelsUpdated}
}

// IsEventType reports whether t is an event type.
func IsEventType(t string) bool {
	for _, e := range EventTypes() {
		if e == t {
			return true
		}
	}
	return false
}

// EventRetention is how long the log keeps an event: a stream can resume from any event
// this recent.
const EventRetention = 7 * 24 * time.Hour

// MaxEventText is how much of a message's text an email.received or email.released
// payload carries (API-NOTES section 14).
const MaxEventText = 64 << 10

// NewEvent is an event a unit of work appends (RecordEvent). What the payload shows of
// the message is read when the event is rendered (EventMessagesOf, Event.Payload): a
// message's bodies never change, and its ids are kept with the event. What the event
// describes of one moment is kept with it: the delivery record, the bounced recipients,
// the labels after a change.
type NewEvent struct {
	Type       string
	MessageRow int64
	OccurredAt time.Time
	Delivery   *Delivery
	Recipients []string
	Labels     []string
	// Message, when set, is the message as this unit of work stores it: the store keeps
	// it in its Arrivals, so that this process renders the payload without reading it back.
	Message *Message
}

// Event is an event of the log.
type Event struct {
	// Seq is the event's place in the log, in commit order: the stream's cursor.
	Seq       int64
	EventID   string
	AccountID string
	InboxRow  int64
	// InboxID is the inbox's id as the API shows it.
	InboxID    string
	Type       string
	OccurredAt time.Time
	MessageRow int64
	// MessageID and ThreadID name the message even after it is deleted.
	MessageID, ThreadID string
	Delivery            *Delivery
	Recipients          []string
	Labels              []string
}

// EventFilter chooses events of one account: of some inboxes (by row; none: every inbox)
// and some types (none: every type).
type EventFilter struct {
	AccountID string
	Inboxes   []int64
	Types     []string
}

// Matches reports whether e passes f.
func (f EventFilter) Matches(e *Event) bool {
	if e.AccountID != f.AccountID {
		return false
	}
	return (len(f.Inboxes) == 0 || containsRow(f.Inboxes, e.InboxRow)) && (len(f.Types) == 0 || containsString(f.Types, e.Type))
}

func containsRow(rows []int64, r int64) bool {
	for _, x := range rows {
		if x == r {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// EventLog is the durable log of events. Several readers (streams, waits, the webhook
// worker, on any process sharing the store) read it independently by cursor.
type EventLog interface {
	// Events returns up to limit events after seq that pass f, in commit order.
	Events(ctx context.Context, after int64, f EventFilter, limit int) ([]Event, error)
	// EventBounds returns the newest seq ever committed (0 when none) and the newest seq
	// retention has dropped (0 when none): a reader whose cursor is below expired has
	// lost events.
	EventBounds(ctx context.Context) (last, expired int64, err error)
	// EventMessages returns the messages events refer to, by row id, loaded with their
	// bodies; a message deleted since is absent.
	EventMessages(ctx context.Context, rows []int64) (map[int64]*Message, error)
	// Arrivals returns the messages this process's units of work stored a moment ago,
	// by the ids of their events (NewEvent.Message).
	Arrivals() *Arrivals
	// EventsCommitted returns a channel that is closed once events are committed after
	// the call, by this process or any other sharing the store. Take it before reading
	// the log, so that nothing committed in between is missed.
	EventsCommitted() <-chan struct{}
	// TrimEvents drops the events that occurred before before, and reports how many.
	TrimEvents(ctx context.Context, before time.Time) (int64, error)
}

// RecordEvent appends an event to the log in a unit of work, and queues its deliveries
// to the webhooks that want it.
func RecordEvent(tx Tx, e NewEvent) error {
	if e.OccurredAt.IsZero() {
		e.OccurredAt = tx.Now()
	}
	a, err := tx.AppendEvent(e)
	if err != nil {
		return err
	}
	return fanOut(tx, a, e.Type)
}

// recordArrival records the event of a new message, stored as row in thread: received,
// or quarantined when it is held. A sent message has delivery events instead
// (CommitSend, DeliveryChanged). The event carries view, the message as stored, for its
// payload (nil: the payload reads it back).
func recordArrival(tx Tx, m *NewMessage, row int64, view *Message) error {
	if m.Direction != Received {
		return nil
	}
	t := EventReceived
	if m.Quarantined() {
		t = EventQuarantined
	}
	return RecordEvent(tx, NewEvent{Type: t, MessageRow: row, Message: view})
}

// DeliveryChanged records the events of a change to a sent message's delivery record d:
// email.delivery_updated with the record, and email.bounced naming the recipients that
// bounced or were suppressed with it. The store calls it wherever it changes a record.
// Both occurred when the record changed (occurredAt is delivery.updatedAt, API-NOTES
// section 14), which the sender stamps a moment before this unit of work runs.
func DeliveryChanged(tx Tx, messageRow int64, d *Delivery, bounced []string) error {
	var at time.Time // zero: the unit's Now (RecordEvent)
	if d != nil {
		at, _ = time.Parse(time.RFC3339Nano, d.UpdatedAt)
		if err := RecordEvent(tx, NewEvent{Type: EventDeliveryUpdated, MessageRow: messageRow, Delivery: d, OccurredAt: at}); err != nil {
			return err
		}
	}
	if len(bounced) == 0 {
		return nil
	}
	return RecordEvent(tx, NewEvent{Type: EventBounced, MessageRow: messageRow, Recipients: bounced, OccurredAt: at})
}

// recordLabelChanges records message.labels_updated for each message whose labels differ
// between before and after (labels by message row).
func recordLabelChanges(tx Tx, before, after map[int64][]string) error {
	for row, labels := range after {
		if sameSet(before[row], labels) {
			continue
		}
		if err := RecordEvent(tx, NewEvent{Type: EventLabelsUpdated, MessageRow: row, Labels: labels}); err != nil {
			return err
		}
	}
	return nil
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !containsString(b, x) {
			return false
		}
	}
	return true
}

// eventMessage is the message of an email.received or email.released payload: the
// getMessage shape without html, its text cut to MaxEventText.
type eventMessage struct {
	Message
	BodyTruncated bool `json:"bodyTruncated"`
	BodiesOmitted bool `json:"bodiesOmitted"`
}

// eventRef names the message of a payload that carries no summary.
type eventRef struct {
	MessageID string   `json:"messageId"`
	ThreadID  string   `json:"threadId"`
	InboxID   string   `json:"inboxId"`
	Labels    []string `json:"labels,omitempty"`
}

type eventPayload struct {
	Type       string    `json:"type"`
	EventID    string    `json:"eventId"`
	InboxID    string    `json:"inboxId"`
	OccurredAt Time      `json:"occurredAt"`
	Message    any       `json:"message"`
	Delivery   *Delivery `json:"delivery,omitempty"`
	Recipients []string  `json:"recipients,omitempty"`
}

// Payload is the event as webhooks and the stream carry it (extensions section 1),
// with m the message it names (EventMessagesOf; nil when it was deleted since: the payload
// then names it by its ids only).
func (e *Event) Payload(m *Message) ([]byte, error) {
	p := eventPayload{Type: e.Type, EventID: e.EventID, InboxID: e.InboxID, OccurredAt: Time{e.OccurredAt}}
	ref := eventRef{MessageID: e.MessageID, ThreadID: e.ThreadID, InboxID: e.InboxID}
	switch {
	case e.Type == EventLabelsUpdated:
		ref.Labels = nonNil(e.Labels)
		p.Message = ref
	case e.Type == EventDeliveryUpdated:
		p.Message, p.Delivery = ref, e.Delivery
	case m == nil:
		p.Message = ref
	case e.Type == EventReceived || e.Type == EventReleased:
		p.Message = withText(m)
	default: // quarantined, bounced
		p.Message = m.SummaryView()
	}
	if e.Type == EventBounced {
		p.Recipients = nonNil(e.Recipients)
	}
	// As the API writes JSON: a Message-ID keeps its <brackets> readable.
	b := payloadBuffers.Get().(*bytes.Buffer)
	defer payloadBuffers.Put(b)
	b.Reset()
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	// A copy of its own size: the hub keeps recent payloads (its ring), and a buffer grown
	// by doubling would keep up to twice that, besides the garbage of each doubling.
	return bytes.Clone(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// payloadBuffers are the buffers payloads are encoded in (Payload).
var payloadBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func withText(m *Message) eventMessage {
	v := eventMessage{Message: m.FullView(false, false)}
	if v.Text != nil && len(*v.Text) > MaxEventText {
		cut := (*v.Text)[:MaxEventText]
		// Not inside a character: drop the start of one cut short (at most 3 bytes).
		for i := 0; i < utf8.UTFMax-1; i++ {
			if r, size := utf8.DecodeLastRuneInString(cut); r != utf8.RuneError || size != 1 {
				break
			}
			cut = cut[:len(cut)-1]
		}
		v.Text, v.BodyTruncated = &cut, true
	}
	return v
}
