package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// The outbox of the test controls (db.TestDouble): sent messages with a row id above the
// mark in settings (outbox_after), which ClearOutbox moves to the newest row.

// outboxAfter is the mark: the outbox holds sent messages with a greater row id.
const outboxAfter = "(SELECT COALESCE((SELECT CAST(CAST(value AS TEXT) AS INTEGER) FROM settings WHERE name = 'outbox_after'), 0))"

// Outbox returns the outbox's messages that pass f, newest first.
func (s *Store) Outbox(ctx context.Context, f db.OutboxFilter) ([]db.OutboxItem, error) {
	var q strings.Builder
	q.WriteString(`SELECT m.id, m.message_id, i.address, m.from_addr, m.to_addrs, m.cc_addrs, m.bcc_addrs, m.subject, m.delivery, m.ts, m.body
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.direction = 'sent' AND m.id > ` + outboxAfter)
	var args []any
	if f.InboxRow != 0 {
		q.WriteString(" AND m.inbox_id = ?")
		args = append(args, f.InboxRow)
	}
	if f.To != "" {
		q.WriteString(` AND ? IN (SELECT lower(value) FROM json_each(m.to_addrs)
			UNION ALL SELECT lower(value) FROM json_each(m.cc_addrs) UNION ALL SELECT lower(value) FROM json_each(m.bcc_addrs))`)
		args = append(args, strings.ToLower(f.To))
	}
	q.WriteString(" ORDER BY m.id DESC LIMIT " + strconv.Itoa(f.Limit))
	query := q.String()
	var out []db.OutboxItem
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		type raw struct {
			row  int64
			body []byte
		}
		var bodies []raw
		for rows.Next() {
			var body []byte
			it, row, err := db.ScanOutboxItem(rows, &body)
			if err != nil {
				rows.Close()
				return err
			}
			out, bodies = append(out, it), append(bodies, raw{row, body})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i, b := range bodies { // after the rows: loadRaw reads other tables
			r, err := loadRaw(ctx, tx, b.row, b.body, 0)
			if err != nil {
				return err
			}
			out[i].Raw = string(r)
		}
		return nil
	})
	return out, err
}

// ClearOutbox moves the mark to the newest message.
func (s *Store) ClearOutbox(ctx context.Context) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return markOutbox(ctx, tx) })
}

// markOutbox moves the outbox's mark to the newest message.
func markOutbox(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO settings(name, value) VALUES ('outbox_after', CAST(CAST((SELECT COALESCE(MAX(id), 0) FROM messages) AS TEXT) AS BLOB))
		ON CONFLICT(name) DO UPDATE SET value = excluded.value`)
	return err
}

// PurgeInbox deletes every message and thread of an inbox, with the rows that belong to
// them, and the inbox's idempotency records (a send repeated after a purge is a new send).
// The search index drops the inbox's messages as for a deleted inbox.
func (s *Store) PurgeInbox(ctx context.Context, inboxRow int64) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM messages WHERE inbox_id = ?", inboxRow) // attachments, labels, queue rows cascade
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		for _, q := range []string{"DELETE FROM threads WHERE inbox_id = ?", "DELETE FROM sends WHERE inbox_id = ?"} {
			if _, err := tx.ExecContext(ctx, q, inboxRow); err != nil {
				return err
			}
		}
		return enqueueInboxDrop(ctx, tx, inboxRow)
	})
	return int(n), err
}
