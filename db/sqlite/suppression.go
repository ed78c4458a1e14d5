package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Suppressions returns the suppression list of an inbox, oldest first.
func (s *Store) Suppressions(ctx context.Context, inboxID int64) ([]db.Suppression, error) {
	ctx = noCancel(ctx)
	rows, err := s.r.QueryContext(ctx, `SELECT address, reason, smtp_code, smtp_enhanced, created_at FROM suppressions
		WHERE inbox_id = ? ORDER BY created_at, address`, inboxID)
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	out := []db.Suppression{}
	for rows.Next() {
		var x db.Suppression
		var created int64
		if err := rows.Scan(&x.Address, &x.Reason, &x.SMTPCode, &x.SMTPEnhanced, &created); err != nil {
			return nil, err
		}
		x.CreatedAt = fromMillis(created).Time
		out = append(out, x)
	}
	return out, storageError(rows.Err())
}

// suppress puts an address on an inbox's suppression list; an address already there keeps
// its first reason.
func suppress(ctx context.Context, tx *sql.Tx, inboxID int64, address string, u db.RecipientDelivery, now time.Time) error {
	reason := u.Reason
	if reason == "" {
		reason = "hard bounce"
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO suppressions(inbox_id, address, reason, smtp_code, smtp_enhanced, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, inboxID, address, reason, u.SMTPStatusCode, u.SMTPEnhancedStatusCode, millis(now))
	return err
}

// applySuppression takes the suppressed recipients of a send out of its queue rows and
// records them `rejected` from the start; a send with any of them gets the bounced label.
func applySuppression(ctx context.Context, tx *sql.Tx, r *db.SendRequest) error {
	if len(r.Recipients) == 0 {
		return nil
	}
	args := []any{r.Message.InboxID}
	for _, a := range r.Recipients {
		args = append(args, a)
	}
	rows, err := tx.QueryContext(ctx, "SELECT address FROM suppressions WHERE inbox_id = ? AND address IN ("+placeholders(len(r.Recipients))+")", args...)
	if err != nil {
		return err
	}
	suppressed := map[string]bool{}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			rows.Close()
			return err
		}
		suppressed[a] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(suppressed) == 0 {
		return err
	}
	queue := make([]string, 0, len(r.Recipients))
	for _, a := range r.Recipients {
		if !suppressed[a] {
			queue = append(queue, a)
		}
	}
	r.Recipients = queue
	if d := r.Message.Delivery; d != nil {
		for i, rd := range d.Recipients {
			if suppressed[rd.Recipient] {
				d.Recipients[i] = db.RecipientDelivery{Recipient: rd.Recipient, Status: db.RecipientRejected, UpdatedAt: rd.UpdatedAt,
					Reason: db.SuppressedReason}
			}
		}
	}
	r.Message.Labels = append(r.Message.Labels, db.LabelBounced)
	return nil
}
