// Package sqlite is inboxd's embedded store: db.Store on one SQLite file in WAL mode,
// with its embedded migrations, group commit and durable queues. Nothing outside this
// package sees SQL, a *sql.Tx or a SQLite error: callers get the model types of package
// db and *db.Error values. Only main (and tests) import it.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"

	"github.com/mattn/go-sqlite3"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configures a Store.
type Options struct {
	// Now is the clock; nil means time.Now. Tests pin it for golden output.
	Now func() time.Time
}

// Store is the SQLite store: one writer connection (SQLite allows one writer at a time, so
// queueing in Go is cheaper than busy-waiting in SQLite) and a pool of readers (WAL lets
// them run beside the writer).
type Store struct {
	w   *sql.DB
	r   readerPool
	dsn string // base DSN of the file, for connections outside the two pools
	now func() time.Time

	tokens      db.Signer // signs page tokens
	downloadKey []byte    // signs attachment download URLs

	writes  writeQueue  // writes waiting for the committer (write.go)
	auth    authCache   // resolved API keys (keys.go)
	inboxes inboxCache  // inboxes by address (inboxes.go)
	events  eventSignal // wakes the event log's readers (events.go)
	// controls wakes the followers of the test controls' state (controls.go).
	controls db.Signal
}

// Open opens (creating if needed) the database at path and brings its schema up to date.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("db: empty database path")
	}
	base := "file:" + (&url.URL{Path: path}).EscapedPath()
	// _stmt_cache_size keeps prepared statements per connection: preparing costs as much
	// as running the small statements of a delivery. The cache only helps a statement
	// whose plan does not depend on its bound values, and SQLite (3.54) lets a plan
	// depend on a limit bound as ?, and on a col = ? in a statement that joins or orders, then
	// prepares it again whenever go-sqlite3 clears the bindings, which it does at every
	// use. So the statements here write +? there: the value is the same, SQLite does
	// not plan by it, and the plan (by index, as before) is made once. A delivery's
	// event insert and thread lookup were each prepared again per message, about a tenth
	// of ingest's CPU, and a listMessages page a third of its own (BENCHMARKS.md).
	common := "_foreign_keys=on&_busy_timeout=10000&_synchronous=NORMAL&_stmt_cache_size=128"
	// The writer keeps 8 MB of pages (SQLite's default is 2 MB): a delivery touches the
	// right edge of the time and id indexes and a random page of the Message-ID index, and
	// what stays cached is neither read again nor, between commits, rewritten. It was
	// 16 MB until the eleventh session; 8 MB came out within the noise for ingest, measured
	// together with that session's other memory changes (BENCHMARKS.md).
	w, err := sql.Open(writerDriverName, base+"?_txlock=immediate&_cache_size=-8192&"+common)
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxLifetime(0)
	s := &Store{w: w, dsn: base + "?_foreign_keys=on", now: opts.Now}
	s.writes.gatherWait = defaultGatherWait
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.setupFile(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("db: open %s: %w", path, err)
	}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("db: migrate %s: %w", path, err)
	}
	r, err := sql.Open(driverName, base+"?mode=ro&"+common)
	if err != nil {
		s.Close()
		return nil, err
	}
	// A reader per P (`inboxd serve` runs two Ps per CPU), at least four: each keeps a
	// 2 MB page cache, and one per P already lets every P wait on a read at once.
	readers := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	s.r = readerPool{r}
	tokenKey, err := s.secret(ctx, "page_token_key")
	if err != nil {
		s.Close()
		return nil, err
	}
	s.tokens = db.NewSigner(tokenKey, pageTokenMAC)
	if s.downloadKey, err = s.secret(ctx, "download_key"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes both pools.
func (s *Store) Close() error {
	var err error
	if s.r.DB != nil {
		err = s.r.Close()
	}
	return errors.Join(err, s.w.Close())
}

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now().UTC() }

// DownloadKey is the secret that signs attachment download URLs.
func (s *Store) DownloadKey() []byte { return s.downloadKey }

// pageSize is the page size of a new database file. A commit writes every page it
// dirtied to the WAL whole, and a delivery dirties a page in each of a dozen tables and
// indexes, so the page size sets most of what a message costs in writes: measured with
// scripts/smtpbench.sh on realistic 2 KB mail, 16 KB pages wrote ~275 KB per message,
// 8 KB pages ~165 KB and 4 KB pages ~110 KB, and 8 KB and 4 KB pages took ~12% less CPU
// than 16 KB. The file's size per message came out the same at all three (about 2.7 KB)
// now that bodies are compressed well. 8 KB keeps a typical row and its compressed body
// inside one page, which 4 KB does not. Row ids of new rows are time-ordered
// (newRowUUID), so inserts append to their indexes instead of dirtying random pages. A
// file keeps the page size it was created with.
const pageSize = 8192

// setupFile gives a new file its page size, then puts the file in WAL mode (which fixes
// the page size, so it comes second; on an existing file both are already settled).
func (s *Store) setupFile(ctx context.Context) error {
	var pages int64
	if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return err
	}
	if pages == 0 {
		if _, err := s.w.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", pageSize)); err != nil {
			return err
		}
	}
	var mode string
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %s, want wal", mode)
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	var version int
	if err := s.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name must start with its version", name)
		}
		if n <= version {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			return err
		}
		err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", n))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// secret returns the named random secret, creating it on first use.
func (s *Store) secret(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, "SELECT value FROM settings WHERE name = ?", name).Scan(&v)
		if err == nil {
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		v = make([]byte, 32)
		if _, err := rand.Read(v); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO settings(name, value) VALUES (?, ?)", name, v)
		return err
	})
	return v, err
}

// noCancel strips ctx of its cancellation for the SQLite driver. database/sql and
// go-sqlite3 start a goroutine per transaction, statement and result set of a cancellable
// context to watch it (sqlite3_interrupt on cancel), which costs more than the small
// statements of a request. Every statement here is bounded (keyset pages, limits,
// busy_timeout for the lock), so a request's statements run to their end; callers check
// their context between calls. read and write apply it to the statements of their fn, and
// the reader pool (readerPool) to every statement run on it: its one home.
func noCancel(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// readerPool is the pool of reader connections. Its statements run without the caller's
// cancellation (noCancel), like those of read and write.
type readerPool struct{ *sql.DB }

// QueryContext runs a query on a reader.
func (p readerPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.DB.QueryContext(noCancel(ctx), query, args...)
}

// QueryRowContext runs a query of one row on a reader.
func (p readerPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.DB.QueryRowContext(noCancel(ctx), query, args...)
}

// BeginTx starts a transaction on a reader.
func (p readerPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return p.DB.BeginTx(noCancel(ctx), opts)
}

// read runs fn in a read transaction, so multi-query reads see one snapshot. fn gets ctx
// without its cancellation (noCancel), for its statements: like a write, a read once asked
// for runs to its end.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx = noCancel(ctx)
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return storageError(err)
	}
	defer tx.Rollback()
	return storageError(fn(ctx, tx))
}

func storageError(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull, sqlite3.ErrReadonly, sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrBusy, sqlite3.ErrLocked:
			return &db.Error{Code: db.ECodeUnavailable, Message: "storage is temporarily unavailable; retry later", Transient: true, Cause: err}
		}
	}
	return err
}

// The SQLite store is inboxd's db.Store.
var _ db.Store = (*Store)(nil)
