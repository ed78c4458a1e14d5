package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/inboxd/inboxd/db"
)

// Label changes (API-NOTES section 4): a message op changes one message, a thread op every
// message of the thread; both refuse the quarantined label and any change to quarantined
// mail, and removal wins over an add.

// UpdateMessageLabels adds and removes labels on one message.
//
// Errors: quarantine_review_required, not_found.
func (s *Store) UpdateMessageLabels(ctx context.Context, inboxID int64, messageID string, add, remove []string) error {
	ctx = noCancel(ctx)
	return s.relabel(ctx, add, remove, "SELECT id FROM messages WHERE inbox_id = ? AND message_id = ?", []any{inboxID, messageID},
		"message "+messageID, "m.id = ?")
}

// UpdateThreadLabels adds and removes labels on every message of a thread.
//
// Errors: quarantine_review_required, not_found.
func (s *Store) UpdateThreadLabels(ctx context.Context, inboxID int64, threadID string, add, remove []string) error {
	ctx = noCancel(ctx)
	return s.relabel(ctx, add, remove, "SELECT id FROM threads WHERE inbox_id = ? AND uuid = ?", []any{inboxID, threadID},
		"thread "+threadID, "m.thread_id = ?")
}

// relabel finds the target row with find, then applies the change to the messages that
// where (a condition on messages m taking the found id) selects, in one transaction.
func (s *Store) relabel(ctx context.Context, add, remove []string, find string, findArgs []any, what, where string) error {
	if err := db.CheckLabelChange(add, remove); err != nil {
		return err
	}
	return s.write(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, find, findArgs...).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return db.Errorf(db.ECodeNotFound, "%s not found", what)
		}
		if err != nil {
			return err
		}
		if len(add)+len(remove) > 0 {
			if err := refuseQuarantined(ctx, tx, what, where, id); err != nil {
				return err
			}
		}
		return applyLabels(ctx, tx, add, remove, where, id)
	})
}

// refuseQuarantined keeps the labels of held mail as the scanner set them until a person
// has reviewed it: a quarantined message carries only `quarantined`, and an added `trash`,
// `received` or `sent` would move it between the views that depend on them. It runs in
// the change's transaction, before any write. Quarantined mail is alone in its thread
// (chooseThread), so a thread change that reaches it reaches nothing else.
func refuseQuarantined(ctx context.Context, tx *sql.Tx, what, where string, id int64) error {
	var held bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM messages m WHERE m.quarantined = 1 AND "+where+")", id).Scan(&held); err != nil {
		return err
	}
	if held {
		return db.Errorf(db.ECodeQuarantineReview, "%s is held in quarantine: its labels can change only after a person releases it in the review dashboard", what)
	}
	return nil
}

// applyLabels adds and removes labels on the messages matched by where (a condition on
// messages m), then refreshes their threads. Removal wins over an add of the same label.
func applyLabels(ctx context.Context, tx *sql.Tx, add, remove []string, where string, args ...any) error {
	removed := map[string]bool{}
	for _, l := range remove {
		removed[l] = true
	}
	for _, l := range add {
		if removed[l] {
			continue
		}
		if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO message_labels(message_id, label) SELECT m.id, ? FROM messages m WHERE "+where,
			append([]any{l}, args...)...); err != nil {
			return err
		}
	}
	for l := range removed {
		if _, err := tx.ExecContext(ctx, "DELETE FROM message_labels WHERE label = ? AND message_id IN (SELECT m.id FROM messages m WHERE "+where+")",
			append([]any{l}, args...)...); err != nil {
			return err
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT m.thread_id FROM messages m WHERE "+where, args...)
	if err != nil {
		return err
	}
	var threads []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		threads = append(threads, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
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
