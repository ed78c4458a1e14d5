package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mattn/go-sqlite3"
)

// Backup writes a consistent copy of the live database to out while the server keeps
// running. VACUUM INTO reads one snapshot (WAL lets writers go on meanwhile) and writes a
// compact, self-contained file: restoring is stopping the server and putting that file in
// place of the database (and deleting any -wal and -shm files beside the old one).
func (s *Store) Backup(ctx context.Context, out string) error {
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("db: backup: %s already exists", out)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("db: backup: %w", err)
	}
	// SQLite reports a file it cannot create as "unable to open database", which reads as
	// a passing storage fault: a missing or unwritable directory is said as such.
	probe, err := os.CreateTemp(filepath.Dir(out), ".inboxd-backup-*")
	if err != nil {
		return fmt.Errorf("db: backup: cannot write %s: %w", out, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	// A connection of its own: on the writer it would stall every write for the whole copy,
	// and the read pool is read-only, which SQLite refuses for VACUUM INTO.
	conn, err := sql.Open(driverName, s.dsn+"&_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", out); err != nil {
		return fmt.Errorf("db: backup: %w", storageError(err))
	}
	return nil
}

// Version reports the version of the SQLite library linked into the binary.
func Version() string {
	v, _, _ := sqlite3.Version()
	return v
}

// IntegrityCheck runs SQLite's integrity check and returns its verdict ("ok" when sound).
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var v string
	err := s.r.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&v)
	return v, err
}
