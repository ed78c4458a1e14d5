// Package postgres is inboxd's shared store: db.Store on one PostgreSQL database (15 or
// later) that any number of inboxd processes use at once (extensions section 9). It keeps
// the contract every store keeps (db/storetest) with its own embedded, versioned
// migrations; nothing outside this package sees SQL, a pgx value or a PostgreSQL error:
// callers get the model types of package db and *db.Error values. Only main (and tests)
// import it.
//
// What makes several processes correct is written where it happens: units of work and
// their isolation (unit.go), the order of the logs readers follow by seq and the
// notifications that wake other processes (log.go), the caches every process's changes
// empty (cache.go), the test controls' fault rules and clock (controls.go), and the leases
// of the durable queues (each queue's file).
//
// How a method here is written:
//   - a write runs in s.write(ctx, func(w *wtx) error): READ COMMITTED, run again on a
//     conflict, so it sets its results afresh; a check that must hold across processes
//     locks its row first (w.lockAccount, w.lockInbox);
//   - a read of several queries runs in s.read (one snapshot); a single query runs on
//     s.pool; every error leaves through storageError (a *db.Error passes as it is);
//   - a change to searchable mail calls w.enqueueIndex (or w.enqueueInboxDrop), an event
//     w.appendEvent, a change to keys, accounts or inboxes w.authChanged; a writer of a
//     message's thread calls w.refreshThread; triage results go through w.setTriage;
//   - times are bigint milliseconds (millis, fromMillis), lists JSON text (jsonList,
//     parseList), verdicts JSON text (jsonText, parseJSON); queries built piece by piece
//     number their arguments with sqlArgs; lists of ids are one array argument (= ANY($n));
//   - raw bytes and attachments are chunks of chunkSize bytes (rawOf reads a message's);
//   - a queue taken by several processes is claimed with FOR UPDATE SKIP LOCKED and a
//     lease (triage_queue.leased_until; outbound.leased_until and lease;
//     webhook_deliveries.claimed_until and claim), so a dead process's rows come back;
//     an outcome is written only while the row is still the claim's (its lease token, or
//     for triage its lease's end), so a process late past its lease undoes no takeover.
package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/inboxd/inboxd/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options configures a Store.
type Options struct {
	// Now is the clock; nil means time.Now. Tests pin it.
	Now func() time.Time
	// MaxConns bounds the connection pool; 0 keeps the URL's pool_max_conns, or
	// defaultMaxConns.
	MaxConns int32
}

// Store is the PostgreSQL store: a pool of connections shared by every request of the
// process, and one more connection that listens for the notifications other processes'
// commits send (log.go).
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time

	tokens      db.Signer // signs page tokens
	downloadKey []byte    // signs attachment download URLs

	events    db.Signal   // wakes the event log's readers (log.go)
	controls  db.Signal   // wakes the followers of the test controls' state (controls.go)
	arrivals  db.Arrivals // the messages of the events this process appended (log.go)
	cache     caches      // keys and inboxes (cache.go)
	queues    queueState  // this process's name on the queues' leases (outbound.go)
	units     unitQueue   // units of work waiting for a committer (group.go)
	threadIDs idReserve   // rows for new threads (tx_messages.go)
	listener  listener
	closed    sync.Once
}

// preferLZ4 makes a new session compress the large values it stores (a message's bodies,
// its raw bytes: most exceed the ~2 KB past which PostgreSQL compresses a row's values)
// with lz4 rather than the default pglz, which takes several times the CPU: on 2 KB mail
// the two inserts that store them took 139 and 71 us with pglz, 101 and 32 with lz4, and
// PostgreSQL's CPU per received message fell from 1,027 to 900 us (BENCHMARKS.md, issue
// 30). A server built without lz4 refuses the setting, and keeps pglz; values already
// stored keep their compression, which reading them does not care about.
func preferLZ4(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SET default_toast_compression = lz4")
	var refused *pgconn.PgError
	if errors.As(err, &refused) {
		return nil
	}
	return err
}

// defaultMaxConns is the pool's size unless the URL's pool_max_conns says otherwise. A
// request spends most of its time waiting for the database, not on a CPU, so the pool is
// larger than pgxpool's default (one per CPU, at least 4), with which four requests
// waiting on slow statements or locks would hold up every other request of a two-core
// process. Sixteen per process (and a listener each) leave a default PostgreSQL
// (max_connections 100) room for five processes. Not measured yet: the benchmarks of
// issue 30 will say.
const defaultMaxConns = 16

// pageTokenMAC is the size of a page token's MAC in bytes: 128 bits keep forgery out of
// reach and the token short.
const pageTokenMAC = 16

// chunkSize is the size of the chunks a message's raw bytes and an attachment are stored
// in (raw_chunks, attachment_chunks): what one chunk costs in memory while it is written
// or read, so a download of a 25 MiB attachment holds one chunk, not the whole of it.
const chunkSize = 256 << 10

// Open connects to the database at url (postgres://user:pass@host:port/dbname?...),
// brings its schema up to date and starts listening for other processes' commits.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The error may quote the URL, password and all: say only what is wrong.
		return nil, errBadURL
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns="):
		cfg.MaxConns = defaultMaxConns
	}
	// Every session reads and writes UTC and fails a statement stuck behind a lock for
	// long rather than hanging a request (the unit of work retries what fails this way).
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "30s"
	cfg.AfterConnect = preferLZ4
	queues := newQueueState()
	cfg.ConnConfig.RuntimeParams["application_name"] = queues.sessionName() // this process's sessions (outbound.go)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, storageError(err)
	}
	s := &Store{pool: pool, now: opts.Now, queues: queues}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.start(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// start migrates, reads the secrets and starts the listener.
func (s *Store) start(ctx context.Context) error {
	if err := s.migrate(ctx); err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	tokenKey, err := s.secret(ctx, "page_token_key")
	if err != nil {
		return err
	}
	if _, err := s.secret(ctx, "search_store_id"); err != nil {
		return err
	}
	s.tokens = db.NewSigner(tokenKey, pageTokenMAC)
	if s.downloadKey, err = s.secret(ctx, "download_key"); err != nil {
		return err
	}
	s.listener.lost = s.pool.Reset
	return s.listener.start(ctx, s.pool.Config().ConnConfig, map[string]func(){
		chanEvents:   s.events.Fire,
		chanAuth:     s.cache.invalidate,
		chanControls: s.controls.Fire,
	})
}

// Close stops the listener and closes the pool.
func (s *Store) Close() error {
	s.closed.Do(func() {
		s.listener.stop()
		s.pool.Close()
	})
	return nil
}

// Now returns the store's clock reading.
func (s *Store) Now() time.Time { return s.now().UTC() }

// DownloadKey is the secret that signs attachment download URLs.
func (s *Store) DownloadKey() []byte { return s.downloadKey }

// migrationLock is the advisory lock key that serializes migrations: several processes
// starting at once on a new database migrate it once.
const migrationLock = 0x696e626f78640001 // "inboxd" 1

// migrate applies the embedded migrations the database does not have yet, all in one
// transaction (PostgreSQL's DDL is transactional: a failed migration leaves nothing).
func (s *Store) migrate(ctx context.Context) error {
	names, err := migrationNames()
	if err != nil {
		return err
	}
	return storageError(pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockMigrations(ctx, tx); err != nil {
			return err
		}
		return applyMigrations(ctx, tx, names)
	}))
}

// lockMigrations takes the advisory lock that serializes migrations (and imports) until
// tx ends.
func lockMigrations(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock))
	return err
}

// applyMigrations applies, in tx, the migrations names the database does not have yet.
func applyMigrations(ctx context.Context, tx pgx.Tx, names []string) error {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&version); err != nil {
		return err
	}
	for _, name := range names {
		n, _ := strconv.Atoi(strings.SplitN(name, "_", 2)[0])
		if n <= version {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations(version) VALUES ($1)", n); err != nil {
			return err
		}
	}
	return nil
}

// migrationNames returns the embedded migrations in version order.
func migrationNames() ([]string, error) {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if _, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0]); err != nil {
			return nil, fmt.Errorf("migration %s: name must start with its version", e.Name())
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// SchemaVersion names the schema the embedded migrations make: their last version and a
// digest of all of them (the tests keep a template database per schema, pgtest).
func SchemaVersion() string {
	names, _ := migrationNames()
	h := sha256.New()
	last := "0"
	for _, n := range names {
		body, _ := migrations.ReadFile("migrations/" + n)
		h.Write(body)
		last = strings.SplitN(n, "_", 2)[0]
	}
	return last + "_" + hex.EncodeToString(h.Sum(nil)[:6])
}

// ForgetSecrets deletes the secrets and the search store id, which the next Open makes
// afresh: for a database that is copied (a template of the tests), so that its copies do
// not share them.
func (s *Store) ForgetSecrets(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM settings WHERE name IN ('page_token_key', 'download_key', 'search_store_id')")
	return storageError(err)
}

// secret returns the named random secret (32 random bytes; 32 hex digits for the
// search_store_id, which is shown as text), creating it on first use; two processes
// creating it at once agree on the one that was stored first.
func (s *Store) secret(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if name == "search_store_id" {
		fresh = []byte(hex.EncodeToString(fresh[:16]))
	}
	if _, err := s.pool.Exec(ctx, "INSERT INTO settings(name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, fresh); err != nil {
		return nil, storageError(err)
	}
	var v []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM settings WHERE name = $1", name).Scan(&v)
	return v, storageError(err)
}

// read runs fn in a read-only transaction that sees one snapshot (REPEATABLE READ), so a
// read of several queries is consistent. It runs on without the caller's cancellation,
// like a write: a read once asked for runs to its end, bounded by its statements.
func (s *Store) read(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx = context.WithoutCancel(ctx)
	return storageError(pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(ctx, tx) }))
}

// querier is what statements run on: the pool, a connection or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// noRows reports whether err says a query of one row found none.
func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// fromMillis and millis are the one time encoding of the schema: bigint milliseconds
// since the Unix epoch, UTC, as in the SQLite store.
func fromMillis(ms int64) db.Time { return db.FromMillis(ms) }

func millis(t time.Time) int64 { return t.UnixMilli() }
