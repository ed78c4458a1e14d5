package postgres

import (
	"context"

	"github.com/inboxd/inboxd/db"
)

// UnitsQueued counts the units of work waiting for the committer (group.go).
func (s *Store) UnitsQueued() int {
	s.units.mu.Lock()
	defer s.units.mu.Unlock()
	return len(s.units.pending)
}

// TxID returns the id of the transaction a unit of work runs in.
func TxID(tx db.Tx) (int64, error) {
	var id int64
	err := tx.(*unit).queryRow("SELECT txid_current()").Scan(&id)
	return id, err
}

// Setting returns a setting of one of the store's pooled sessions.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// Committers is how many groups of units a store runs at once.
const Committers = committers
