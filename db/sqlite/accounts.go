package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// UpsertAccount, AccountExists and AttachDomain are what db.EnsureAccount and
// db.CreateKey read and write. A unit that changes accounts clears the auth cache once it
// is done (Update): whether an account is disabled decides what its keys may do.

func (u *unit) UpsertAccount(a db.Account) error {
	u.keysChanged = true
	_, err := u.tx.ExecContext(u.ctx, `INSERT INTO accounts(id, plan, disabled, inbox_quota, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(id) DO UPDATE SET plan = excluded.plan`,
		a.ID, a.Plan, a.Disabled, a.InboxQuota, millis(u.now))
	return err
}

func (u *unit) AccountExists(accountID string) (bool, error) {
	var n int
	err := u.tx.QueryRowContext(u.ctx, "SELECT COUNT(*) FROM accounts WHERE id = ?", accountID).Scan(&n)
	return n > 0, err
}

func (u *unit) AttachDomain(domain, accountID string) error {
	_, err := u.tx.ExecContext(u.ctx, "INSERT INTO account_domains(domain, account_id) VALUES (?, ?)", domain, accountID)
	return err
}

// CountAccounts returns how many accounts exist.
func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM accounts").Scan(&n)
	return n, storageError(err)
}

// Account returns one account.
//
// Errors: not_found.
func (s *Store) Account(ctx context.Context, id string) (*db.Account, error) {
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
	var n int
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM account_domains WHERE domain = ?", strings.ToLower(domain)).Scan(&n)
	return n > 0, storageError(err)
}

// SetAccountDisabled disables an account or enables it again; its keys answer
// access_denied while it is disabled (db.StoredKey.Resolve).
//
// Errors: not_found.
func (s *Store) SetAccountDisabled(ctx context.Context, accountID string, disabled bool) error {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE accounts SET disabled = ? WHERE id = ?", disabled, accountID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	s.auth.invalidate()
	if err != nil {
		return err
	}
	if n == 0 {
		return db.Errorf(db.ECodeNotFound, "account %s not found", accountID)
	}
	return nil
}
