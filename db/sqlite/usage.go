package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/inboxd/inboxd/db"
)

// SetUsage sets the units an account has spent on a feature in the current period.
func (s *Store) SetUsage(ctx context.Context, accountID, feature string, used int64) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO usage(account_id, period, feature, used) VALUES (?, ?, ?, ?)
			ON CONFLICT(account_id, period, feature) DO UPDATE SET used = excluded.used`,
			accountID, db.BillingPeriod(s.Now()), feature, used)
		return err
	})
}

func usedUnits(ctx context.Context, tx *sql.Tx, accountID, feature, period string) (int64, error) {
	var used int64
	err := tx.QueryRowContext(ctx, "SELECT used FROM usage WHERE account_id = ? AND period = ? AND feature = ?",
		accountID, period, feature).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return used, err
}

func accountPlan(ctx context.Context, tx *sql.Tx, accountID string) (string, error) {
	var plan string
	err := tx.QueryRowContext(ctx, "SELECT plan FROM accounts WHERE id = ?", accountID).Scan(&plan)
	if errors.Is(err, sql.ErrNoRows) {
		return "", db.Errorf(db.ECodeNotFound, "account %s not found", accountID)
	}
	return plan, err
}

// GetUsage reports an account's plan, inbox count and remaining balances.
func (s *Store) GetUsage(ctx context.Context, accountID string) (*db.Usage, error) {
	now := s.Now()
	var u *db.Usage
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		plan, err := accountPlan(ctx, tx, accountID)
		if err != nil {
			return err
		}
		var c db.UsageCounts
		var quota sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM inboxes WHERE account_id = ?1 AND retired_at IS NULL),
			inbox_quota FROM accounts WHERE id = ?1`, accountID).Scan(&c.Inboxes, &quota); err != nil {
			return err
		}
		if quota.Valid {
			c.InboxQuota = &quota.Int64
		}
		if c.Domains, err = countRows(ctx, tx, "SELECT COUNT(*) FROM account_domains WHERE account_id = ?", accountID); err != nil {
			return err
		}
		if c.Sends, err = usedUnits(ctx, tx, accountID, db.FeatureSends, db.BillingPeriod(now)); err != nil {
			return err
		}
		if c.Triage, err = usedUnits(ctx, tx, accountID, db.FeatureTriage, db.BillingPeriod(now)); err != nil {
			return err
		}
		u = db.UsageOf(plan, c, now)
		return nil
	})
	return u, err
}

func countRows(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}
