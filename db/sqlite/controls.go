package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/inboxd/inboxd/db"
)

// The test controls' fault rules and clock offset (db.ControlState): one settings row,
// changed by the one writer. The store is one process's, so ControlsChanged fires after
// this store's own commits; the state lives in the file like the PostgreSQL store's, so
// one design serves both (a server starting with the test controls clears it, as it
// empties the outbox: a restart begins clean, as it did when the state was in memory).

// Controls returns the state.
func (s *Store) Controls(ctx context.Context) (*db.ControlState, error) {
	var c *db.ControlState
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stored, err := storedControls(ctx, tx)
		if err == nil {
			c, err = db.DecodeControls(stored)
		}
		return err
	})
	return c, err
}

// storedControls reads the settings row of the state; nil when there is none.
func storedControls(ctx context.Context, tx *sql.Tx) ([]byte, error) {
	var stored []byte
	err := tx.QueryRowContext(ctx, "SELECT value FROM settings WHERE name = ?", db.ControlsSetting).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return stored, err
}

// UpdateControls changes the state with fn.
func (s *Store) UpdateControls(ctx context.Context, fn func(*db.ControlState) bool) (*db.ControlState, error) {
	var out *db.ControlState
	changed := false
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stored, err := storedControls(ctx, tx)
		if err != nil {
			return err
		}
		c, next, err := db.ChangeControls(stored, fn)
		out, changed = c, next != nil
		if err != nil || next == nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO settings(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
			db.ControlsSetting, next)
		return err
	})
	if err != nil {
		return nil, err
	}
	if changed {
		s.controls.Fire()
	}
	return out, nil
}

// ControlsChanged returns a channel closed once a change commits.
func (s *Store) ControlsChanged() <-chan struct{} { return s.controls.Wait() }
