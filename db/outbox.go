package db

import (
	"context"
	"encoding/json"
)

// The test double's view of sent mail (extensions section 6): the outbox is every message
// sent through the API since the server started or the outbox was cleared, whatever its
// transport, with the MIME as it left.

// OutboxItem is one sent message of the outbox.
type OutboxItem struct {
	MessageID string    `json:"messageId"`
	InboxID   string    `json:"inboxId"`
	From      string    `json:"from"`
	To        []string  `json:"to"`
	Cc        []string  `json:"cc"`
	Bcc       []string  `json:"bcc"`
	Subject   string    `json:"subject"`
	Raw       string    `json:"raw"`
	Delivery  *Delivery `json:"delivery"`
	CreatedAt Time      `json:"createdAt"`
}

// OutboxFilter narrows the outbox: one inbox (row; 0: every inbox), one recipient in to,
// cc or bcc ("": any), at most Limit messages.
type OutboxFilter struct {
	InboxRow int64
	To       string
	Limit    int
}

// TestDouble is what the test controls read and change beyond the API's operations.
type TestDouble interface {
	// Outbox returns the outbox's messages that pass f, newest first.
	Outbox(ctx context.Context, f OutboxFilter) ([]OutboxItem, error)
	// ClearOutbox takes every message sent so far out of the outbox (they stay in their
	// inboxes).
	ClearOutbox(ctx context.Context) error
	// PurgeInbox deletes every message and thread of an inbox, received and sent, with
	// their queue rows and idempotency records; the inbox and its address stay. It returns
	// how many messages it deleted.
	PurgeInbox(ctx context.Context, inboxRow int64) (int, error)
	// SnapshotForReset records the store's state as it is, for ResetToSnapshot.
	SnapshotForReset(ctx context.Context) error
	// ResetToSnapshot brings accounts, keys, inboxes, mail, queues, usage, idempotency
	// records, suppressions, webhooks and events back to what SnapshotForReset recorded,
	// empties the outbox, and queues every message it drops or restores for the search
	// indexes; the review dashboard's operators and audit log stay as they are.
	// Errors: not_found (no snapshot was taken).
	ResetToSnapshot(ctx context.Context) error

	// Controls returns the test controls' fault rules and clock offset (controls.go), as
	// every process of the database shares them.
	Controls(ctx context.Context) (*ControlState, error)
	// UpdateControls changes them with fn through ChangeControls, in a transaction that no
	// other change to them interleaves with, and returns them as they are after it; once
	// it commits, every process's ControlsChanged fires. fn may run more than once, so it
	// sets its results afresh.
	UpdateControls(ctx context.Context, fn func(*ControlState) bool) (*ControlState, error)
	// ControlsChanged returns a channel closed once a change to them commits after the
	// call, made by this process or another (or once another's changes may have been
	// missed, such as after a lost connection: read them again then).
	ControlsChanged() <-chan struct{}
}

// ScanOutboxItem decodes an outbox row: the message's row id, Message-ID, inbox address,
// from, to, cc and bcc (stored lists), subject, delivery (JSON or NULL) and time
// (milliseconds), then the store's own columns into extra. Raw is left for the store to
// read, by the row id returned.
func ScanOutboxItem(r RowScanner, extra ...any) (OutboxItem, int64, error) {
	var (
		it          OutboxItem
		row, ts     int64
		to, cc, bcc string
		delivery    *string
	)
	dest := append([]any{&row, &it.MessageID, &it.InboxID, &it.From, &to, &cc, &bcc, &it.Subject, &delivery, &ts}, extra...)
	if err := r.Scan(dest...); err != nil {
		return it, 0, err
	}
	it.To, it.Cc, it.Bcc, it.CreatedAt = DecodeList(to), DecodeList(cc), DecodeList(bcc), FromMillis(ts)
	if delivery != nil {
		it.Delivery = new(Delivery)
		if err := json.Unmarshal([]byte(*delivery), it.Delivery); err != nil {
			return it, 0, err
		}
	}
	return it, row, nil
}
