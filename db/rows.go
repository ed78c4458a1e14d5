package db

import (
	"encoding/json"
	"fmt"
	"time"
)

// Both stores read the same columns into the same model types; what turns a row into a
// value, or several rows into a result, lives here once, and each store keeps only its
// SQL and its driver. Rows and RowScanner are what database/sql's *sql.Rows and pgx's
// Rows have in common, so this package imports neither.

// RowScanner is one row of a query result.
type RowScanner interface{ Scan(dest ...any) error }

// Rows is a query result read row by row; the caller closes it.
type Rows interface {
	RowScanner
	Next() bool
	Err() error
}

// FromMillis is a stored millisecond timestamp as a Time in UTC.
func FromMillis(ms int64) Time { return Time{Time: time.UnixMilli(ms).UTC()} }

// FromMillisOrZero decodes a time stored as milliseconds where 0 is none: the zero time
// (LoginTries.LastFail).
func FromMillisOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return FromMillis(ms).Time
}

// MillisOrZero encodes a time for FromMillisOrZero: the zero time is 0.
func MillisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// EachRow calls each for every row of rows, in order, and stops at its first error.
func EachRow(rows Rows, each func(RowScanner) error) error {
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ScanRows decodes every row of rows with scan, in order; no rows is a nil slice.
func ScanRows[T any](rows Rows, scan func(RowScanner) (T, error)) ([]T, error) {
	var out []T
	err := EachRow(rows, func(r RowScanner) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanList is ScanRows for a list the API shows: no rows is the empty list, not nil.
func ScanList[T any](rows Rows, scan func(RowScanner) (T, error)) ([]T, error) {
	out, err := ScanRows(rows, scan)
	if out == nil && err == nil {
		out = []T{}
	}
	return out, err
}

// ScanInt64 decodes a row of one integer column.
func ScanInt64(row RowScanner) (int64, error) {
	var v int64
	err := row.Scan(&v)
	return v, err
}

// ScanString decodes a row of one text column.
func ScanString(row RowScanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// ScanStringSet reads rows of one text column as a set.
func ScanStringSet(rows Rows) (map[string]bool, error) {
	list, err := ScanRows(rows, ScanString)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[s] = true
	}
	return set, nil
}

// ScanQueuedTriage decodes a claimed triage queue row: the queue's message row, attempts
// and whether it is charged, then the message's account, Message-ID, from, to, cc,
// subject, received time (milliseconds) and the signals JSON.
func ScanQueuedTriage(row RowScanner) (QueuedTriage, error) {
	var d QueuedTriage
	j := &d.Job
	var to, cc, signals string
	var ts int64
	if err := row.Scan(&j.MessageRow, &j.Attempts, &d.Charged, &j.AccountID, &j.MessageID, &j.From, &to, &cc, &j.Subject, &ts, &signals); err != nil {
		return d, err
	}
	j.To, j.Cc, j.ReceivedAt = DecodeList(to), DecodeList(cc), FromMillis(ts).Time
	if err := json.Unmarshal([]byte(signals), &j.Signals); err != nil {
		return d, fmt.Errorf("db: triage signals of message %d: %w", j.MessageRow, err)
	}
	return d, nil
}

// ScanParticipants reads rows of from, to and cc (to and cc as stored lists), in the
// thread's order, into its participants.
func ScanParticipants(rows Rows) (Participants, error) {
	var p Participants
	for rows.Next() {
		var from, to, cc string
		if err := rows.Scan(&from, &to, &cc); err != nil {
			return p, err
		}
		p.Add(from, DecodeList(to), DecodeList(cc))
	}
	return p, rows.Err()
}

// AttachmentsToLoad gives every message an attachment list (empty, not nil) and returns
// the ids of those that have attachments, with each id's index in msgs, for FillAttachments.
func AttachmentsToLoad(msgs []Message) ([]int64, map[int64]int) {
	var ids []int64
	idx := map[int64]int{}
	for i := range msgs {
		if msgs[i].Attachments == nil {
			msgs[i].Attachments = []AttachmentSummary{}
		}
		if msgs[i].AttachmentCount > 0 {
			idx[msgs[i].ID] = i
			ids = append(ids, msgs[i].ID)
		}
	}
	return ids, idx
}

// FillAttachments appends rows of attachment id, message row, uuid, filename, content
// type and size to the messages they belong to (idx from AttachmentsToLoad).
func FillAttachments(rows Rows, msgs []Message, idx map[int64]int) error {
	for rows.Next() {
		var a AttachmentSummary
		var mid int64
		if err := rows.Scan(&a.ID, &mid, &a.AttachmentID, &a.Filename, &a.ContentType, &a.Size); err != nil {
			return err
		}
		msgs[idx[mid]].Attachments = append(msgs[idx[mid]].Attachments, a)
	}
	return rows.Err()
}

// ScanInbox decodes an inbox row: id, uuid, account, address, display name and group
// (both may be NULL), delivery status, setup available, created (milliseconds) and
// retired at (NULL while it lives).
func ScanInbox(row RowScanner) (*Inbox, error) {
	var (
		in      Inbox
		display *string
		created int64
		retired *int64
	)
	if err := row.Scan(&in.ID, &in.UUID, &in.AccountID, &in.Address, &display, &in.Group, &in.DeliveryStatus, &in.SetupAvailable,
		&created, &retired); err != nil {
		return nil, err
	}
	in.InboxID = in.Address
	if display != nil {
		in.DisplayName = *display
	}
	in.CreatedAt = FromMillis(created)
	in.Retired = retired != nil
	return &in, nil
}
