package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/inboxd/inboxd/db"
)

// labelTarget finds a label change's target (db.Tx.LabelTarget).
func labelTarget(ctx context.Context, tx *sql.Tx, inboxID int64, thread bool, id string) (db.LabelTarget, bool, error) {
	find := "SELECT id FROM messages WHERE inbox_id = ? AND message_id = ?"
	if thread {
		find = "SELECT id FROM threads WHERE inbox_id = ? AND uuid = ?"
	}
	t := db.LabelTarget{Thread: thread}
	err := tx.QueryRowContext(ctx, find, inboxID, id).Scan(&t.Row)
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	err = tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM messages m WHERE m.quarantined = 1 AND "+targetWhere(t)+")", t.Row).Scan(&t.Held)
	return t, true, err
}

// targetWhere is the condition on messages m that selects what t reaches; it takes t.Row.
func targetWhere(t db.LabelTarget) string {
	if t.Thread {
		return "m.thread_id = ?"
	}
	return "m.id = ?"
}

// applyLabels adds and removes labels on the messages matched by where (a condition on
// messages m), then refreshes their threads.
func applyLabels(ctx context.Context, tx *sql.Tx, add, remove []string, where string, args ...any) error {
	for _, l := range add {
		if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO message_labels(message_id, label) SELECT m.id, ? FROM messages m WHERE "+where,
			append([]any{l}, args...)...); err != nil {
			return err
		}
	}
	for _, l := range remove {
		if _, err := tx.ExecContext(ctx, "DELETE FROM message_labels WHERE label = ? AND message_id IN (SELECT m.id FROM messages m WHERE "+where+")",
			append([]any{l}, args...)...); err != nil {
			return err
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT m.thread_id FROM messages m WHERE "+where, args...)
	if err != nil {
		return err
	}
	threads, err := db.ScanRows(rows, db.ScanInt64)
	rows.Close()
	if err != nil {
		return err
	}
	for _, t := range threads {
		if err := refreshThread(ctx, tx, t); err != nil {
			return err
		}
	}
	// Trash hides a message from search; other labels are not searched.
	for _, l := range append(append([]string(nil), add...), remove...) {
		if l == db.LabelTrash || l == db.LabelQuarantined {
			return enqueueIndex(ctx, tx, where, args...)
		}
	}
	return nil
}
