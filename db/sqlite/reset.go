package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// The reset of the test controls (db.TestDouble, extensions section 6): a copy of every
// data table, taken once the start-up fixtures are loaded, in tables named snapshotPrefix
// + the table's name; a reset empties the data tables and copies the rows back, row ids
// included, in one transaction. Tables are found in the schema, so one a later migration
// adds is covered without a change here.

// snapshotPrefix names the copies.
const snapshotPrefix = "reset_snapshot_"

// resetKept are the tables a reset leaves alone: settings, the review dashboard's operators,
// their sessions and login counts, and its audit log (a person's record, not test state),
// and the change log with its readers, which tell the search indexes what the reset changed.
var resetKept = map[string]bool{"settings": true, "operators": true, "dashboard_sessions": true, "login_tries": true,
	"audit_log": true, "index_queue": true, "change_readers": true}

// dataTables returns the tables a reset restores.
func dataTables(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if !resetKept[name] && !strings.HasPrefix(name, snapshotPrefix) {
			out = append(out, name)
		}
	}
	return out, rows.Err()
}

// SnapshotForReset copies every data table.
func (s *Store) SnapshotForReset(ctx context.Context) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		tables, err := dataTables(ctx, tx)
		if err != nil {
			return err
		}
		for _, t := range tables {
			for _, q := range []string{"DROP TABLE IF EXISTS " + snapshotPrefix + t, "CREATE TABLE " + snapshotPrefix + t + " AS SELECT * FROM " + t} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ResetToSnapshot restores the data tables from their copies. Foreign keys are checked at
// the commit (a child may be copied back before its parent); every message there was
// before and every message restored is queued for the search indexes, which drop what
// is gone and index what is back as it was. The caches of what the tables hold are
// emptied: inboxes, keys, and the webhooks events fan out to (a webhook the reset took
// away must get no delivery).
//
// Errors: not_found (no snapshot).
func (s *Store) ResetToSnapshot(ctx context.Context) error {
	defer s.inboxes.invalidate()
	defer s.auth.invalidate()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		s.events.hooks.change()
		tables, err := dataTables(ctx, tx)
		if err != nil {
			return err
		}
		var snapshots int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name LIKE ?",
			snapshotPrefix+"%").Scan(&snapshots); err != nil {
			return err
		}
		if snapshots == 0 {
			return db.Errorf(db.ECodeNotFound, "no snapshot to reset to: the server takes one at start with --test-controls")
		}
		if _, err := tx.ExecContext(ctx, "PRAGMA defer_foreign_keys = ON"); err != nil {
			return err
		}
		if err := enqueueIndex(ctx, tx, "1"); err != nil { // what is there now: dropped or restored
			return err
		}
		for _, t := range tables {
			if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
				return err
			}
		}
		for _, t := range tables {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+t+" SELECT * FROM "+snapshotPrefix+t); err != nil {
				return err
			}
		}
		if err := enqueueIndex(ctx, tx, "1"); err != nil { // what is back
			return err
		}
		// The snapshot's events are kept again, whatever retention dropped since (a test
		// that moved the clock): a stream resumes from before them, as right after start-up.
		if _, err := tx.ExecContext(ctx, `UPDATE settings SET value = CAST(CAST((SELECT MIN(seq) - 1 FROM events) AS TEXT) AS BLOB)
			WHERE name = 'events_expired_through' AND CAST(CAST(value AS TEXT) AS INTEGER) > (SELECT MIN(seq) - 1 FROM events)`); err != nil {
			return err
		}
		return markOutbox(ctx, tx)
	})
}
