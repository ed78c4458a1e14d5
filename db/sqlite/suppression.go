package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Suppressions returns the suppression list of an inbox, oldest first.
func (s *Store) Suppressions(ctx context.Context, inboxID int64) ([]db.Suppression, error) {
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

// suppressedAmong returns which of addrs are on an inbox's suppression list.
func suppressedAmong(ctx context.Context, tx *sql.Tx, inboxID int64, addrs []string) (map[string]bool, error) {
	suppressed := map[string]bool{}
	if len(addrs) == 0 {
		return suppressed, nil
	}
	args := []any{inboxID}
	for _, a := range addrs {
		args = append(args, a)
	}
	rows, err := tx.QueryContext(ctx, "SELECT address FROM suppressions WHERE inbox_id = ? AND address IN ("+placeholders(len(addrs))+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanStringSet(rows)
}
