package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// CountAccounts returns how many accounts exist.
func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM accounts").Scan(&n)
	return n, storageError(err)
}

// Account returns one account.
//
// Errors: not_found.
func (s *Store) Account(ctx context.Context, id string) (*db.Account, error) {
	var (
		a       db.Account
		quota   *int64
		created int64
	)
	err := s.pool.QueryRow(ctx, "SELECT id, plan, disabled, inbox_quota, created_at FROM accounts WHERE id = $1", id).
		Scan(&a.ID, &a.Plan, &a.Disabled, &quota, &created)
	if noRows(err) {
		return nil, db.Errorf(db.ECodeNotFound, "account %s not found", id)
	}
	if err != nil {
		return nil, storageError(err)
	}
	if quota != nil {
		q := int(*quota)
		a.InboxQuota = &q
	}
	a.CreatedAt = fromMillis(created).Time
	return &a, nil
}

// AccountDomains returns the domains attached to an account.
func (s *Store) AccountDomains(ctx context.Context, accountID string) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT domain FROM account_domains WHERE account_id = $1 ORDER BY domain", accountID)
	if err != nil {
		return nil, storageError(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, storageError(err)
}

// DomainServed reports whether any account owns domain.
func (s *Store) DomainServed(ctx context.Context, domain string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM account_domains WHERE domain = $1)", strings.ToLower(domain)).Scan(&ok)
	return ok, storageError(err)
}

// SetAccountDisabled disables an account or enables it again; its keys answer
// access_denied while it is disabled (db.StoredKey.Resolve).
//
// Errors: not_found.
func (s *Store) SetAccountDisabled(ctx context.Context, accountID string, disabled bool) error {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		if err := w.authChanged(); err != nil {
			return err
		}
		tag, err := w.exec("UPDATE accounts SET disabled = $1 WHERE id = $2", disabled, accountID)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return db.Errorf(db.ECodeNotFound, "account %s not found", accountID)
	}
	return nil
}

// SetUsage sets the units an account has spent on a feature in the current period.
func (s *Store) SetUsage(ctx context.Context, accountID, feature string, used int64) error {
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO usage(account_id, period, feature, used) VALUES ($1, $2, $3, $4)
			ON CONFLICT (account_id, period, feature) DO UPDATE SET used = excluded.used`,
			accountID, db.BillingPeriod(w.now), feature, used)
		return err
	})
}

// GetUsage reports an account's plan, inbox count and remaining balances.
func (s *Store) GetUsage(ctx context.Context, accountID string) (*db.Usage, error) {
	now := s.Now()
	var u *db.Usage
	err := s.read(ctx, func(ctx context.Context, tx pgx.Tx) error {
		plan, err := accountPlan(ctx, tx, accountID)
		if err != nil {
			return err
		}
		var c db.UsageCounts
		period := db.BillingPeriod(now)
		if err := tx.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM inboxes WHERE account_id = $1 AND retired_at IS NULL), inbox_quota,
			(SELECT COUNT(*) FROM account_domains WHERE account_id = $1),
			COALESCE((SELECT used FROM usage WHERE account_id = $1 AND period = $2 AND feature = $3), 0),
			COALESCE((SELECT used FROM usage WHERE account_id = $1 AND period = $2 AND feature = $4), 0)
			FROM accounts WHERE id = $1`, accountID, period, db.FeatureSends, db.FeatureTriage).
			Scan(&c.Inboxes, &c.InboxQuota, &c.Domains, &c.Sends, &c.Triage); err != nil {
			return err
		}
		u = db.UsageOf(plan, c, now)
		return nil
	})
	return u, err
}
