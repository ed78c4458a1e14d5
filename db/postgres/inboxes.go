package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// Inboxes by address are read through the process's cache (cache.go), which every change
// to an inbox, by any process, empties: a retired inbox is retired on every process
// (extensions section 9).

// InboxByAddress returns an inbox of the account by its address (any case).
//
// Errors: not_found (unknown, or another account's), inbox_retired (deleted).
func (s *Store) InboxByAddress(ctx context.Context, accountID, address string) (*db.Inbox, error) {
	addr := strings.ToLower(address)
	in, err := s.inboxAt(ctx, addr)
	if noRows(err) || (err == nil && in.AccountID != accountID) {
		return nil, db.Errorf(db.ECodeNotFound, "inbox %s not found", addr)
	}
	if err != nil {
		return nil, err
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
	in, err := s.inboxWhere(ctx, "i.id = $1", id)
	if noRows(err) {
		return nil, db.Errorf(db.ECodeNotFound, "inbox not found")
	}
	return in, err
}

// LocalInbox returns the inbox (of any account) at address, retired or not, for delivery.
//
// Errors: not_found.
func (s *Store) LocalInbox(ctx context.Context, address string) (*db.Inbox, error) {
	in, err := s.inboxAt(ctx, strings.ToLower(address))
	if noRows(err) {
		return nil, db.Errorf(db.ECodeNotFound, "no inbox at %s", address)
	}
	return in, err
}

// inboxAt reads the inbox at addr (lowercase) through the cache; pgx.ErrNoRows when none.
func (s *Store) inboxAt(ctx context.Context, addr string) (*db.Inbox, error) {
	if in, ok := s.cache.inboxes.get(addr); ok {
		return in.Clone(), nil
	}
	gen := s.cache.inboxes.generation()
	in, err := s.inboxWhere(ctx, "i.address = $1", addr)
	if err == nil {
		s.cache.inboxes.put(addr, gen, *in.Clone())
	}
	return in, err
}

// inboxWhere reads the inbox that cond (on inboxes i) selects; pgx.ErrNoRows when none.
func (s *Store) inboxWhere(ctx context.Context, cond string, arg any) (*db.Inbox, error) {
	in, err := db.ScanInbox(s.pool.QueryRow(ctx, "SELECT "+inboxColumns+" FROM inboxes i WHERE "+cond, arg))
	if err != nil && !noRows(err) {
		return nil, storageError(err)
	}
	return in, err
}

// ListInboxes returns one page of an account's live inboxes, oldest first.
//
// Errors: invalid_argument (page token).
func (s *Store) ListInboxes(ctx context.Context, accountID string, group *string, limit int, pageToken string) ([]db.Inbox, string, error) {
	scopeParts := []string{"inboxes", accountID}
	var args sqlArgs
	q := "SELECT " + inboxColumns + " FROM inboxes i WHERE i.account_id = " + args.add(accountID) + " AND i.retired_at IS NULL"
	if group != nil {
		scopeParts = append(scopeParts, "group", *group)
		q += " AND i.grp = " + args.add(*group)
	}
	scope := db.ListScope(scopeParts...)
	c, err := s.tokens.DecodePageToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, q+keyset("i.created_at", "i.id", false, c, limit, &args), args...)
	if err != nil {
		return nil, "", storageError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.Inbox, error) {
		in, err := db.ScanInbox(r)
		if err != nil {
			return db.Inbox{}, err
		}
		return *in, nil
	})
	if err != nil {
		return nil, "", storageError(err)
	}
	if out == nil {
		out = []db.Inbox{}
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(in db.Inbox) (int64, int64) { return millis(in.CreatedAt.Time), in.ID })
	return out, next, nil
}

// UpdateInboxGroup moves an inbox to a group, or out of any group when group is nil.
func (s *Store) UpdateInboxGroup(ctx context.Context, in *db.Inbox, group *string) (*db.Inbox, error) {
	err := s.write(ctx, func(w *wtx) error {
		if err := w.authChanged(); err != nil {
			return err
		}
		_, err := w.exec("UPDATE inboxes SET grp = $1 WHERE id = $2 AND retired_at IS NULL", group, in.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := *in
	out.Group = group
	return &out, nil
}

// FinishSetup completes delivery routing of a reserved inbox. Routing is local to the
// servers, so it always succeeds; calling it on a ready inbox is a no-op.
func (s *Store) FinishSetup(ctx context.Context, in *db.Inbox) (*db.Inbox, error) {
	err := s.write(ctx, func(w *wtx) error {
		if err := w.authChanged(); err != nil {
			return err
		}
		_, err := w.exec("UPDATE inboxes SET delivery_status = $1 WHERE id = $2 AND retired_at IS NULL", db.DeliveryReady, in.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := *in
	out.DeliveryStatus = db.DeliveryReady
	return &out, nil
}

// DeleteInbox retires an inbox for good and deletes its mail, sends, queue rows, events
// and mailbox keys in one transaction. The address stays reserved so it is never reused.
// The inbox row is locked first, so a delivery or send racing with the deletion (one
// that locked it, SendsSince) either commits before it, and its mail is deleted with the
// rest, or waits and then finds the inbox retired.
func (s *Store) DeleteInbox(ctx context.Context, in *db.Inbox) error {
	return s.write(ctx, func(w *wtx) error {
		if err := w.lockInbox(in.ID); err != nil {
			return err
		}
		if err := w.authChanged(); err != nil {
			return err
		}
		for _, q := range []string{
			// Attachments, labels and queue rows go with their messages (ON DELETE CASCADE).
			"DELETE FROM messages WHERE inbox_id = $1",
			"DELETE FROM threads WHERE inbox_id = $1",
			"DELETE FROM sends WHERE inbox_id = $1",
			"DELETE FROM keys WHERE inbox_id = $1",
			"DELETE FROM events WHERE inbox_id = $1",
		} {
			if _, err := w.exec(q, in.ID); err != nil {
				return err
			}
		}
		if err := w.enqueueInboxDrop(in.ID); err != nil {
			return err
		}
		_, err := w.exec("UPDATE inboxes SET retired_at = $1, display_name = NULL, grp = NULL WHERE id = $2", millis(w.now), in.ID)
		return err
	})
}
