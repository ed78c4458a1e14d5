package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// The outbox of the test controls (db.TestDouble): sent messages with a row id above the
// mark in settings (outbox_after), which ClearOutbox moves to the newest row. The mark is
// in the database, so every process shows the same outbox.

// outboxAfter is the mark: the outbox holds sent messages with a greater row id.
const outboxAfter = "(SELECT COALESCE((SELECT convert_from(value, 'UTF8')::bigint FROM settings WHERE name = 'outbox_after'), 0))"

// Outbox returns the outbox's messages that pass f, newest first.
func (s *Store) Outbox(ctx context.Context, f db.OutboxFilter) ([]db.OutboxItem, error) {
	var args sqlArgs
	var q strings.Builder
	q.WriteString(`SELECT m.id, m.message_id, i.address, m.from_addr, m.to_addrs, m.cc_addrs, m.bcc_addrs, m.subject, m.delivery, m.ts
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.direction = 'sent' AND m.id > ` + outboxAfter)
	if f.InboxRow != 0 {
		q.WriteString(" AND m.inbox_id = " + args.add(f.InboxRow))
	}
	if f.To != "" {
		to := args.add(strings.ToLower(f.To))
		q.WriteString(" AND " + to + ` IN (SELECT lower(a) FROM json_array_elements_text(m.to_addrs::json) a
			UNION ALL SELECT lower(a) FROM json_array_elements_text(m.cc_addrs::json) a
			UNION ALL SELECT lower(a) FROM json_array_elements_text(m.bcc_addrs::json) a)`)
	}
	q.WriteString(" ORDER BY m.id DESC LIMIT " + strconv.Itoa(f.Limit))
	var out []db.OutboxItem
	err := s.read(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		var msgRows []int64
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.OutboxItem, error) {
			it, row, err := db.ScanOutboxItem(r)
			msgRows = append(msgRows, row)
			return it, err
		})
		if err != nil {
			return err
		}
		for i, row := range msgRows {
			raw, err := rawOf(ctx, tx, row)
			if err != nil {
				return err
			}
			out[i].Raw = string(raw)
		}
		return nil
	})
	return out, err
}

// ClearOutbox moves the mark to the newest message.
func (s *Store) ClearOutbox(ctx context.Context) error {
	return s.write(ctx, func(w *wtx) error { return w.markOutbox() })
}

// markOutbox moves the outbox's mark to the newest message.
func (w *wtx) markOutbox() error {
	_, err := w.exec(`INSERT INTO settings(name, value) VALUES ('outbox_after', convert_to((SELECT COALESCE(MAX(id), 0) FROM messages)::text, 'UTF8'))
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`)
	return err
}

// PurgeInbox deletes every message and thread of an inbox, with the rows that belong to
// them, and the inbox's idempotency records (a send repeated after a purge is a new send).
// The search indexes drop the inbox's messages as for a deleted inbox.
func (s *Store) PurgeInbox(ctx context.Context, inboxRow int64) (int, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		tag, err := w.exec("DELETE FROM messages WHERE inbox_id = $1", inboxRow) // attachments, labels, queue rows cascade
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		for _, q := range []string{"DELETE FROM threads WHERE inbox_id = $1", "DELETE FROM sends WHERE inbox_id = $1"} {
			if _, err := w.exec(q, inboxRow); err != nil {
				return err
			}
		}
		return w.enqueueInboxDrop(inboxRow)
	})
	return int(n), err
}
