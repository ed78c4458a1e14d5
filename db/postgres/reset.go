package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// The reset of the test controls (db.TestDouble, extensions section 6): a copy of every
// data table, taken once the start-up fixtures are loaded, in tables named snapshotPrefix
// + the table's name (CREATE TABLE ... AS); a reset empties the data tables (one TRUNCATE
// of all of them) and copies the rows back, row ids included, in one transaction, with
// the foreign keys checked at its commit (they are DEFERRABLE, migration 0001). Tables are
// found in the catalog, so one a later migration adds is covered without a change here.
// The copies live in the database, so any process resets what the first one recorded;
// TRUNCATE locks the tables until the commit, so no process reads half a reset.

// snapshotPrefix names the copies.
const snapshotPrefix = "reset_snapshot_"

// resetKept are the tables a reset leaves alone: settings, the review dashboard's operators,
// their sessions and login counts, and its audit log (a person's record, not test state),
// the change log with its readers and the logs' heads, which tell the search indexes and
// streams what the reset changed, and the migrations' record.
var resetKept = map[string]bool{"settings": true, "operators": true, "dashboard_sessions": true, "login_tries": true,
	"audit_log": true, "index_queue": true, "change_readers": true, "log_heads": true, "schema_migrations": true}

// dataTables returns the tables a reset restores, and how many copies exist.
func dataTables(ctx context.Context, tx querier) (tables []string, snapshots int, err error) {
	rows, err := tx.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")
	if err != nil {
		return nil, 0, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, 0, err
	}
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, snapshotPrefix):
			snapshots++
		case !resetKept[name]:
			tables = append(tables, name)
		}
	}
	return tables, snapshots, nil
}

// SnapshotForReset copies every data table.
func (s *Store) SnapshotForReset(ctx context.Context) error {
	return s.write(ctx, func(w *wtx) error {
		tables, _, err := dataTables(w.ctx, w.q())
		if err != nil {
			return err
		}
		for _, t := range tables {
			for _, q := range []string{"DROP TABLE IF EXISTS " + snapshotPrefix + t, "CREATE TABLE " + snapshotPrefix + t + " AS SELECT * FROM " + t} {
				if _, err := w.exec(q); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ResetToSnapshot restores the data tables from their copies. Every message there was
// before and every message restored is queued for the search indexes, which drop what is
// gone and index what is back as it was.
//
// Errors: not_found (no snapshot).
func (s *Store) ResetToSnapshot(ctx context.Context) error {
	return s.write(ctx, func(w *wtx) error {
		tables, snapshots, err := dataTables(w.ctx, w.q())
		if err != nil {
			return err
		}
		if snapshots == 0 {
			return db.Errorf(db.ECodeNotFound, "no snapshot to reset to: the server takes one at start with --test-controls")
		}
		if err := w.authChanged(); err != nil {
			return err
		}
		// The tables first, the log lock after them (log.go).
		if _, err := w.exec("LOCK TABLE " + strings.Join(tables, ", ") + " IN ACCESS EXCLUSIVE MODE"); err != nil {
			return err
		}
		if _, err := w.exec("SET CONSTRAINTS ALL DEFERRED"); err != nil {
			return err
		}
		if err := w.enqueueIndex("true"); err != nil { // what is there now: dropped or restored
			return err
		}
		if _, err := w.exec("TRUNCATE " + strings.Join(tables, ", ")); err != nil {
			return err
		}
		for _, t := range tables {
			if _, err := w.exec("INSERT INTO " + t + " SELECT * FROM " + snapshotPrefix + t); err != nil {
				return err
			}
		}
		if err := w.enqueueIndex("true"); err != nil { // what is back
			return err
		}
		// The snapshot's events are kept again, whatever retention dropped since (a test
		// that moved the clock): a stream resumes from before them, as right after start-up.
		if _, err := w.exec("UPDATE log_heads SET expired = (SELECT MIN(seq) - 1 FROM events) WHERE name = 'events' AND expired > (SELECT MIN(seq) - 1 FROM events)"); err != nil {
			return err
		}
		return w.markOutbox()
	})
}
