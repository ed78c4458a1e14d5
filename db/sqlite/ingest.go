package sqlite

import (
	"context"
	"database/sql"

	"github.com/inboxd/inboxd/db"
)

// settleThread brings a thread's aggregates up to date after message row (n) joined it.
// A thread made for this very message (it still counts no message: an empty thread
// never outlives a transaction) gets them from the message itself, which saves the
// subqueries of refreshThread on the busiest path (most inbound mail starts a thread);
// any other thread is refreshed.
func settleThread(ctx context.Context, tx *sql.Tx, threadRow, messageRow int64, n *db.NewMessage) error {
	ts := millis(n.Timestamp)
	var received, sent sql.NullInt64
	if n.Direction == db.Sent {
		sent = sql.NullInt64{Int64: ts, Valid: true}
	} else {
		received = sql.NullInt64{Int64: ts, Valid: true}
	}
	trashed := false
	for _, l := range n.Labels {
		trashed = trashed || l == db.LabelTrash
	}
	var l threadLists
	l.Add(n.From, n.To, n.Cc)
	l.labels = db.LabelSet(n.Labels)
	res, err := tx.ExecContext(ctx, `UPDATE threads SET last_message = ?, last_ts = ?, message_count = 1, attachment_count = ?,
		received_ts = ?, sent_ts = ?, all_trashed = ?, quarantined = ?, senders = ?, recipients = ?, labels = ?
		WHERE id = ? AND message_count = 0`,
		messageRow, ts, len(n.Attachments), received, sent, trashed, n.Quarantined(),
		db.EncodeList(l.Senders), db.EncodeList(l.Recipients), db.EncodeList(l.labels), threadRow)
	if err != nil {
		return err
	}
	if done, err := res.RowsAffected(); err != nil || done == 1 {
		return err
	}
	return appendToThread(ctx, tx, threadRow, messageRow, n, ts, trashed)
}

// appendToThread adds a message to the aggregates of the thread it joined when it is the
// thread's newest (a reply arriving: the common case), from the thread row alone; any other
// case (mail arriving out of order, a thread without kept lists) recomputes them all.
func appendToThread(ctx context.Context, tx *sql.Tx, threadRow, messageRow int64, n *db.NewMessage, ts int64, trashed bool) error {
	var (
		lastTS                      int64
		received, sent              sql.NullInt64
		allTrashed, quarantined     bool
		senders, recipients, labels sql.NullString
	)
	err := tx.QueryRowContext(ctx, `SELECT last_ts, received_ts, sent_ts, all_trashed, quarantined, senders, recipients, labels
		FROM threads WHERE id = ?`, threadRow).Scan(&lastTS, &received, &sent, &allTrashed, &quarantined, &senders, &recipients, &labels)
	if err != nil {
		return err
	}
	if ts < lastTS || !senders.Valid || !recipients.Valid || !labels.Valid {
		return refreshThread(ctx, tx, threadRow)
	}
	if n.Direction == db.Sent {
		sent = sql.NullInt64{Int64: max(ts, sent.Int64), Valid: true}
	} else {
		received = sql.NullInt64{Int64: max(ts, received.Int64), Valid: true}
	}
	l := threadLists{}
	for _, a := range db.DecodeList(senders.String) {
		l.Add(a, nil, nil)
	}
	l.Add("", db.DecodeList(recipients.String), nil)
	l.Add(n.From, n.To, n.Cc)
	_, err = tx.ExecContext(ctx, `UPDATE threads SET last_message = ?, last_ts = ?, message_count = message_count + 1,
		attachment_count = attachment_count + ?, received_ts = ?, sent_ts = ?, all_trashed = ?, quarantined = ?,
		senders = ?, recipients = ?, labels = ? WHERE id = ?`,
		messageRow, ts, len(n.Attachments), received, sent, allTrashed && trashed, quarantined && n.Quarantined(),
		db.EncodeList(l.Senders), db.EncodeList(l.Recipients), db.EncodeList(db.LabelSet(db.DecodeList(labels.String), n.Labels)), threadRow)
	return err
}
