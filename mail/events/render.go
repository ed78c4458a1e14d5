package events

import (
	"context"

	"github.com/inboxd/inboxd/db"
)

// render loads the messages events name and renders each payload once.
func render(ctx context.Context, store Store, evs []db.Event) ([]*Item, error) {
	var rows []int64
	for _, e := range evs {
		if needsMessage(e.Type) {
			rows = append(rows, e.MessageRow)
		}
	}
	msgs, err := store.EventMessages(ctx, rows)
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
