package postgres

import (
	"context"

	"github.com/inboxd/inboxd/db"
)

// The test controls' fault rules and clock offset (db.ControlState), shared by every
// process of the database: one settings row, changed under its row lock, and a
// notification on chanControls once a change commits, on which every process reads the
// state again (package mail) — the path a revoked key takes to the caches (cache.go).

// chanControls is the channel of changes to the test controls' state.
const chanControls = "inboxd_controls"

// Controls returns the state.
func (s *Store) Controls(ctx context.Context) (*db.ControlState, error) {
	var stored []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM settings WHERE name = $1", db.ControlsSetting).Scan(&stored)
	if err != nil && !noRows(err) {
		return nil, storageError(err)
	}
	c, err := db.DecodeControls(stored)
	return c, storageError(err)
}

// UpdateControls changes the state with fn, the row locked from its read to the commit.
func (s *Store) UpdateControls(ctx context.Context, fn func(*db.ControlState) bool) (*db.ControlState, error) {
	var out *db.ControlState
	err := s.write(ctx, func(w *wtx) error {
		// The row exists before it is locked, so that two processes changing a new
		// database's state for the first time take turns on it rather than conflict.
		if _, err := w.exec("INSERT INTO settings(name, value) VALUES ($1, 'null') ON CONFLICT (name) DO NOTHING", db.ControlsSetting); err != nil {
			return err
		}
		var stored []byte
		if err := w.queryRow("SELECT value FROM settings WHERE name = $1 FOR UPDATE", db.ControlsSetting).Scan(&stored); err != nil {
			return err
		}
		c, changed, err := db.ChangeControls(stored, fn)
		if err != nil || changed == nil {
			out = c
			return err
		}
		if _, err := w.exec("UPDATE settings SET value = $2 WHERE name = $1", db.ControlsSetting, changed); err != nil {
			return err
		}
		out = c
		return w.notify(chanControls)
	})
	return out, err
}

// ControlsChanged returns a channel closed once the listener hears of a change, or
// connects again after losing its connection.
func (s *Store) ControlsChanged() <-chan struct{} { return s.controls.Wait() }
