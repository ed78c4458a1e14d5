package db

import (
	"encoding/json"
	"time"
)

// The stored event row both stores write and read: what an event keeps of its moment is
// one nullable JSON column, detail.

// eventDetail is what an event keeps of its moment (NewEvent).
type eventDetail struct {
	Delivery   *Delivery `json:"delivery,omitempty"`
	Recipients []string  `json:"recipients,omitempty"`
	Labels     []string  `json:"labels,omitempty"`
}

// EventDetail is the detail column of e: its delivery, recipients and labels as JSON, or
// nil (NULL) when it has none.
func EventDetail(e NewEvent) (*string, error) {
	if e.Delivery == nil && e.Recipients == nil && e.Labels == nil {
		return nil, nil
	}
	b, err := json.Marshal(eventDetail{Delivery: e.Delivery, Recipients: e.Recipients, Labels: e.Labels})
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// ScanEvent decodes an event row: seq, event id, account, inbox row, inbox address, type,
// time (milliseconds), message row, Message-ID, thread id and detail (EventDetail).
func ScanEvent(r RowScanner) (Event, error) {
	var (
		e      Event
		at     int64
		detail *string
	)
	if err := r.Scan(&e.Seq, &e.EventID, &e.AccountID, &e.InboxRow, &e.InboxID, &e.Type, &at, &e.MessageRow,
		&e.MessageID, &e.ThreadID, &detail); err != nil {
		return e, err
	}
	e.OccurredAt = time.UnixMilli(at).UTC()
	if detail != nil {
		var d eventDetail
		if err := json.Unmarshal([]byte(*detail), &d); err != nil {
			return e, err
		}
		e.Delivery, e.Recipients, e.Labels = d.Delivery, d.Recipients, d.Labels
	}
	return e, nil
}

// ScanEventsBySeq reads event rows (ScanEvent) into a map by seq.
func ScanEventsBySeq(rows Rows) (map[int64]Event, error) {
	out := map[int64]Event{}
	err := EachRow(rows, func(r RowScanner) error {
		e, err := ScanEvent(r)
		out[e.Seq] = e
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
