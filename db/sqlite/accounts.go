package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// EnsureAccount creates the account if it does not exist, else updates its plan, and
// attaches the given domains to it. Running it twice with the same input changes nothing.
//
// Errors: invalid_argument (unknown plan), domain_conflict (a domain belongs to another account).
func (s *Store) EnsureAccount(ctx context.Context, a db.Account, domains []string) error {
	ctx = noCancel(ctx)
	if _, ok := db.PlanByID(a.Plan); !ok && a.Plan != db.PlanExempt {
		return db.Errorf(db.ECodeInvalidArgument, "plan: unknown plan %q", a.Plan)
	}
	if a.ID == "" {
		return db.Errorf(db.ECodeInvalidArgument, "id: account id is required")
	}
	now := s.Now()
	defer s.auth.invalidate() // keys, accounts and mailbox keys decide who a key is
	return s.write(ctx, func(tx *sql.Tx) error {
		// Only the plan follows the input on an existing account: the disabled flag and the
		// quota are operator decisions that re-loading a fixture must not undo.
		_, err := tx.ExecContext(ctx, `INSERT INTO accounts(id, plan, disabled, inbox_quota, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT(id) DO UPDATE SET plan = excluded.plan`,
			a.ID, a.Plan, a.Disabled, a.InboxQuota, millis(now))
		if err != nil {
			return err
		}
		for _, d := range domains {
			d = strings.ToLower(d)
			var owner string
			err := tx.QueryRowContext(ctx, "SELECT account_id FROM account_domains WHERE domain = ?", d).Scan(&owner)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if _, err := tx.ExecContext(ctx, "INSERT INTO account_domains(domain, account_id) VALUES (?, ?)", d, a.ID); err != nil {
					return err
				}
			case err != nil:
				return err
			case owner != a.ID:
				return db.Errorf("domain_conflict", "domain %s belongs to another account", d)
			}
		}
		return nil
	})
}

// CountAccounts returns how many accounts exist.
func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	ctx = noCancel(ctx)
	var n int
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM accounts").Scan(&n)
	return n, storageError(err)
}

// Account returns one account.
//
// Errors: not_found.
func (s *Store) Account(ctx context.Context, id string) (*db.Account, error) {
	ctx = noCancel(ctx)
	var (
		a       db.Account
		quota   sql.NullInt64
		created int64
	)
	err := s.r.QueryRowContext(ctx, "SELECT id, plan, disabled, inbox_quota, created_at FROM accounts WHERE id = ?", id).
		Scan(&a.ID, &a.Plan, &a.Disabled, &quota, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.Errorf(db.ECodeNotFound, "account %s not found", id)
	}
	if err != nil {
		return nil, storageError(err)
	}
	if quota.Valid {
		q := int(quota.Int64)
		a.InboxQuota = &q
	}
	a.CreatedAt = fromMillis(created).Time
	return &a, nil
}

// AccountDomains returns the domains attached to an account.
func (s *Store) AccountDomains(ctx context.Context, accountID string) ([]string, error) {
	ctx = noCancel(ctx)
	rows, err := s.r.QueryContext(ctx, "SELECT domain FROM account_domains WHERE account_id = ? ORDER BY domain", accountID)
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// DomainServed reports whether any account owns domain.
func (s *Store) DomainServed(ctx context.Context, domain string) (bool, error) {
	ctx = noCancel(ctx)
	var n int
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM account_domains WHERE domain = ?", strings.ToLower(domain)).Scan(&n)
	return n > 0, storageError(err)
}

func accountExists(ctx context.Context, tx *sql.Tx, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM accounts WHERE id = ?", id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return db.Errorf(db.ECodeNotFound, "account %s not found", id)
	}
	return nil
}
