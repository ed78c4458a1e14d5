package events

import (
	"context"

	"github.com/inboxd/inboxd/db"
)

// render loads the messages events name (in at most one read: those this process stored a
// moment ago are at hand) and renders each payload once.
func render(ctx context.Context, store db.EventLog, evs []db.Event) ([]*Item, error) {
	var named []db.Event
	for _, e := range evs {
		if needsMessage(e.Type) {
			named = append(named, e)
		}
	}
	msgs, err := db.EventMessagesOf(ctx, store, named)
	if err != nil {
		return nil, err
	}
	out := make([]*Item, len(evs))
	for i := range evs {
		data, err := evs[i].Payload(msgs[evs[i].MessageRow])
		if err != nil {
			return nil, err
		}
		out[i] = &Item{Event: evs[i], Data: data}
	}
	return out, nil
}

// needsMessage reports whether a payload of type t shows the message's summary or text
// (db.Event.Payload); the others name it by the ids the event keeps.
func needsMessage(t string) bool { return t != db.EventLabelsUpdated && t != db.EventDeliveryUpdated }

// bare wraps events without payloads, for a subscriber that reads only what changed.
func bare(evs []db.Event) []*Item {
	out := make([]*Item, len(evs))
	for i := range evs {
		out[i] = &Item{Event: evs[i]}
	}
	return out
}

// StorePayloads renders payloads straight from the store, for a reader without a hub.
type StorePayloads struct{ Store db.EventLog }

// Payloads renders the payloads of evs, reading what this process did not store a moment
// ago in one read.
func (p StorePayloads) Payloads(ctx context.Context, evs []db.Event) ([][]byte, error) {
	items, err := render(ctx, p.Store, evs)
	if err != nil {
		return nil, err
	}
	return payloadsOf(items), nil
}

func payloadsOf(items []*Item) [][]byte {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it.Data
	}
	return out
}

// Payloads returns the payloads of evs: the ones the hub rendered for a stream from the
// ring, the others rendered now in one read of the store. The webhook worker posts
// through it, so that an event both streamed and posted is read back and encoded once.
func (h *Hub) Payloads(ctx context.Context, evs []db.Event) ([][]byte, error) {
	out := make([][]byte, len(evs))
	var missing []db.Event
	var at []int
	for i := range evs {
		if out[i] = h.rendered(evs[i].Seq); out[i] == nil {
			missing, at = append(missing, evs[i]), append(at, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	items, err := render(ctx, h.store, missing)
	if err != nil {
		return nil, err
	}
	h.keepAhead(items)
	for j, i := range at {
		out[i] = items[j].Data
	}
	return out, nil
}
