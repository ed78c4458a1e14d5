package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

const inboxColumns = "i.id, i.uuid, i.account_id, i.address, i.display_name, i.grp, i.delivery_status, i.setup_available, i.created_at, i.retired_at"

// inboxAllowance reads what decides whether an account may have one more inbox
// (db.Tx.InboxAllowance).
func inboxAllowance(ctx context.Context, tx *sql.Tx, accountID string) (db.InboxAllowance, error) {
	var a db.InboxAllowance
	var quota sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM inboxes WHERE account_id = ?1 AND retired_at IS NULL), inbox_quota, plan
		FROM accounts WHERE id = ?1`, accountID).Scan(&a.Live, &quota, &a.Plan)
	if errors.Is(err, sql.ErrNoRows) {
		return a, db.Errorf(db.ECodeNotFound, "account %s not found", accountID)
	}
	if quota.Valid {
		a.Quota = &quota.Int64
	}
	return a, err
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// InboxByAddress returns an inbox of the account by its address (any case).
//
// Errors: not_found (unknown, or another account's), inbox_retired (deleted).
func (s *Store) InboxByAddress(ctx context.Context, accountID, address string) (*db.Inbox, error) {
	in, err := s.inboxByAddress(ctx, strings.ToLower(address))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && in.AccountID != accountID) {
		return nil, db.Errorf(db.ECodeNotFound, "inbox %s not found", strings.ToLower(address))
	}
	if err != nil {
		return nil, storageError(err)
	}
	if in.Retired {
		return nil, db.Errorf(db.ECodeInboxRetired, "inbox %s was deleted", in.Address)
	}
	return in, nil
}

// InboxByRowID returns an inbox by its internal id, retired or not.
//
// Errors: not_found.
func (s *Store) InboxByRowID(ctx context.Context, id int64) (*db.Inbox, error) {
	in, err := db.ScanInbox(s.r.QueryRowContext(ctx, "SELECT "+inboxColumns+" FROM inboxes i WHERE i.id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.Errorf(db.ECodeNotFound, "inbox not found")
	}
	return in, storageError(err)
}

// LocalInbox returns the inbox (of any account) at address, retired or not, for delivery.
//
// Errors: not_found.
func (s *Store) LocalInbox(ctx context.Context, address string) (*db.Inbox, error) {
	in, err := s.inboxByAddress(ctx, strings.ToLower(address))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.Errorf(db.ECodeNotFound, "no inbox at %s", address)
	}
	return in, storageError(err)
}

// ListInboxes returns one page of an account's live inboxes, oldest first.
//
// Errors: invalid_argument (page token).
func (s *Store) ListInboxes(ctx context.Context, accountID string, group *string, limit int, pageToken string) ([]db.Inbox, string, error) {
	scopeParts := []string{"inboxes", accountID}
	q := "SELECT " + inboxColumns + " FROM inboxes i WHERE i.account_id = ? AND i.retired_at IS NULL"
	args := []any{accountID}
	if group != nil {
		scopeParts = append(scopeParts, "group", *group)
		q += " AND i.grp = ?"
		args = append(args, *group)
	}
	scope := db.ListScope(scopeParts...)
	c, err := s.decodeToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	page, pageArgs := keyset("i.created_at", "i.id", false, c, limit)
	q += page
	args = append(args, pageArgs...)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", storageError(err)
	}
	defer rows.Close()
	out := []db.Inbox{}
	for rows.Next() {
		in, err := db.ScanInbox(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, *in)
	}
	if err := rows.Err(); err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(in db.Inbox) (int64, int64) { return millis(in.CreatedAt.Time), in.ID })
	return out, next, nil
}

// UpdateInboxGroup moves an inbox to a group, or out of any group when group is nil.
func (s *Store) UpdateInboxGroup(ctx context.Context, in *db.Inbox, group *string) (*db.Inbox, error) {
	defer s.inboxes.invalidate()
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE inboxes SET grp = ? WHERE id = ? AND retired_at IS NULL", group, in.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := *in
	out.Group = group
	return &out, nil
}

// FinishSetup completes delivery routing of a reserved inbox. Routing is local to this
// server, so it always succeeds; calling it on a ready inbox is a no-op.
func (s *Store) FinishSetup(ctx context.Context, in *db.Inbox) (*db.Inbox, error) {
	defer s.inboxes.invalidate()
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "UPDATE inboxes SET delivery_status = ? WHERE id = ? AND retired_at IS NULL", db.DeliveryReady, in.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := *in
	out.DeliveryStatus = db.DeliveryReady
	return &out, nil
}

// DeleteInbox retires an inbox for good and deletes its mail, sends, queue rows and
// mailbox keys in one transaction. The address stays reserved so it is never reused.
func (s *Store) DeleteInbox(ctx context.Context, in *db.Inbox) error {
	now := s.Now()
	defer s.inboxes.invalidate()
	defer s.auth.invalidate() // keys, accounts and mailbox keys decide who a key is
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range []string{
			// Attachments, labels and queue rows go with their messages (ON DELETE CASCADE).
			"DELETE FROM messages WHERE inbox_id = ?",
			"DELETE FROM threads WHERE inbox_id = ?",
			"DELETE FROM sends WHERE inbox_id = ?",
			"DELETE FROM keys WHERE inbox_id = ?",
			"DELETE FROM events WHERE inbox_id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, in.ID); err != nil {
				return err
			}
		}
		if err := enqueueInboxDrop(ctx, tx, in.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE inboxes SET retired_at = ?, display_name = NULL, grp = NULL WHERE id = ?", millis(now), in.ID)
		return err
	})
}

// inboxByAddress reads an inbox through the cache: every request with an inbox in its
// path resolves it, and inboxes rarely change.
func (s *Store) inboxByAddress(ctx context.Context, addr string) (*db.Inbox, error) {
	if in, ok := s.inboxes.get(addr); ok {
		return in, nil
	}
	gen := s.inboxes.generation()
	in, err := db.ScanInbox(s.r.QueryRowContext(ctx, "SELECT "+inboxColumns+" FROM inboxes i WHERE i.address = ?", addr))
	if err == nil {
		s.inboxes.put(addr, gen, in)
	}
	return in, err
}

// inboxCacheTTL bounds how long a cached inbox is used. Changes made through this store
// clear the cache at once; the TTL bounds changes made by another process (inboxd seed).
const inboxCacheTTL = 5 * time.Second

type inboxCache struct {
	mu  sync.RWMutex
	gen uint64
	m   map[string]inboxEntry
	// addresses are the addresses of inbox rows, for the events of deliveries handed
	// over at commit (offers.go): a row's address never changes, but the test controls'
	// reset deletes inboxes, and a row may then come back with another.
	addresses map[int64]addressEntry
}

type addressEntry struct {
	address string
	until   time.Time
}

// addressOf returns the address of inbox row when kept.
func (c *inboxCache) addressOf(row int64) (string, bool) {
	c.mu.RLock()
	e, ok := c.addresses[row]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.until) {
		return "", false
	}
	return e.address, true
}

// putAddress keeps the address of inbox row, read at generation gen.
func (c *inboxCache) putAddress(row int64, gen uint64, address string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.addresses == nil || len(c.addresses) >= 10000 {
		c.addresses = map[int64]addressEntry{}
	}
	c.addresses[row] = addressEntry{address: address, until: time.Now().Add(inboxCacheTTL)}
}

type inboxEntry struct {
	in    db.Inbox
	until time.Time
}

func (c *inboxCache) get(addr string) (*db.Inbox, bool) {
	c.mu.RLock()
	e, ok := c.m[addr]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.until) {
		return nil, false
	}
	return e.in.Clone(), true
}

func (c *inboxCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

func (c *inboxCache) put(addr string, gen uint64, in *db.Inbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return // an inbox changed since the row was read
	}
	if c.m == nil || len(c.m) >= 10000 {
		c.m = map[string]inboxEntry{}
	}
	c.m[addr] = inboxEntry{in: *in.Clone(), until: time.Now().Add(inboxCacheTTL)}
}

func (c *inboxCache) invalidate() {
	c.mu.Lock()
	c.gen++
	c.m, c.addresses = nil, nil
	c.mu.Unlock()
}
