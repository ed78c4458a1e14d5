package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
	"github.com/inboxd/inboxd/db/sqlite"
)

// --db names the database: a file path is the embedded SQLite store, a postgres:// (or
// postgresql://) URL the shared PostgreSQL store that several processes may use at once
// (extensions section 9). Each process keeps files of its own beside either: the search
// index and the SMTP spool, beside the SQLite file, or in --data-dir for a URL.

// isDatabaseURL reports whether dsn names a PostgreSQL database rather than a file.
func isDatabaseURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openDB opens (creating and migrating if needed) the store dsn names.
func openDB(ctx context.Context, dsn string, now func() time.Time) (db.Store, error) {
	if isDatabaseURL(dsn) {
		return postgres.Open(ctx, dsn, postgres.Options{Now: now})
	}
	return sqlite.Open(ctx, dsn, sqlite.Options{Now: now})
}

// openExisting opens the database of a command that works on one that exists (keys,
// reindex): for a file, db.Open would create an empty database at a mistyped path, and the
// command would then report an unknown account, or an empty index, as if that were all.
func openExisting(ctx context.Context, cmd, dsn string) (db.Store, error) {
	if !isDatabaseURL(dsn) {
		if _, err := os.Stat(dsn); err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
	}
	return openDB(ctx, dsn, nil)
}

// localBase is the path the process's own files are named after: the SQLite file itself,
// or, for a URL, "inboxd" in dataDir (created when missing).
func localBase(dsn, dataDir string) (string, error) {
	if !isDatabaseURL(dsn) {
		return dsn, nil
	}
	if dataDir == "" {
		dataDir = "inboxd-data"
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("--data-dir: %w", err)
	}
	return filepath.Join(dataDir, "inboxd"), nil
}

// describeDB names the database for a log line: a URL without its password and query.
func describeDB(dsn string) string {
	if !isDatabaseURL(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "PostgreSQL (URL not shown)"
	}
	return "postgres://" + u.Host + u.Path
}

// errPGBackup answers backup for a URL: PostgreSQL's own tools copy a live database.
var errPGBackup = errors.New("backup: a PostgreSQL database is backed up with its own tools: pg_dump --format=custom --file=OUT 'postgres://...' (restore with pg_restore), or the managed database's backups")

// The help of the flags that name the database and the process's own files.
const (
	dbFlagHelp      = "database: an SQLite file, or postgres://user:pass@host:port/dbname?sslmode=... shared by several inboxd processes"
	dataDirFlagHelp = "with a postgres:// --db, the directory of this process's own files (search index, SMTP spool); each process needs its own"
)
