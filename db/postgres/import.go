package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// An import fills an empty database with what another store holds (`inboxd migrate`
// moves an SQLite file here). CopiedTables is the one list of what is copied: a table
// added to the schema (migrations/) must be added to it or to notCopied, and a test fails
// until it is (import_test.go); a column must be listed or be in notCopiedColumns, which
// Import checks against the database before it copies anything.

// CopiedTable is a table an import fills and the columns it copies, in order.
type CopiedTable struct {
	Name    string
	Columns []string
}

// CopiedTables lists the tables an import fills, in the order their rows refer to each
// other (foreign keys are deferred to the commit anyway).
var CopiedTables = []CopiedTable{
	// page_token_key and download_key: old page tokens and attachment links keep working.
	{"settings", []string{"name", "value"}},
	{"accounts", []string{"id", "plan", "disabled", "inbox_quota", "created_at"}},
	{"account_domains", []string{"domain", "account_id"}},
	{"usage", []string{"account_id", "period", "feature", "used"}},
	{"inboxes", []string{"id", "uuid", "account_id", "address", "display_name", "grp", "delivery_status", "setup_available", "created_at", "retired_at"}},
	{"keys", []string{"id", "account_id", "kind", "hash", "prefix", "scopes", "inbox_id", "expires_at", "revoked_at", "created_at"}},
	{"threads", []string{"id", "uuid", "inbox_id", "last_ts", "last_message", "message_count", "attachment_count", "received_ts", "sent_ts", "all_trashed", "quarantined", "senders", "recipients", "labels"}},
	{"messages", []string{"id", "uuid", "inbox_id", "thread_id", "message_id", "direction", "ts", "from_addr", "to_addrs", "cc_addrs", "bcc_addrs", "reply_to", "subject", "preview", "in_reply_to", "refs", "attachment_count", "quarantined", "triage", "tri_category", "tri_reply", "tri_urgency", "protection", "delivery", "body_size", "body_text", "body_html"}},
	{"message_labels", []string{"message_id", "label"}},
	{"raw_chunks", []string{"message_id", "seq", "data"}},
	{"attachments", []string{"id", "uuid", "message_id", "position", "filename", "content_type", "size"}},
	{"attachment_chunks", []string{"attachment_id", "seq", "data"}},
	{"protection_details", []string{"message_id", "detail"}},
	{"sends", []string{"inbox_id", "idem_key", "fingerprint", "message_id", "thread_id", "created_at"}},
	{"suppressions", []string{"inbox_id", "address", "reason", "smtp_code", "smtp_enhanced", "created_at"}},
	{"outbound", []string{"id", "message_id", "recipient", "state", "attempts", "next_at", "created_at", "state_at"}},
	{"triage_queue", []string{"message_id", "next_at", "attempts", "charged_period", "created_at", "signals"}},
	{"operators", []string{"name", "password_hash", "updated_at"}},
	// The operator stays logged in across the move, and a guesser's count stays.
	{"dashboard_sessions", []string{"token_hash", "operator", "expires_at"}},
	{"login_tries", []string{"client", "pending", "failed", "last_fail", "reported", "touched_at"}},
	{"audit_log", []string{"id", "at", "actor", "action", "account_id", "inbox", "message_id", "detail", "remote"}},
	{"events", []string{"seq", "event_id", "account_id", "inbox_id", "type", "occurred_at", "message_row", "message_id", "thread_id", "detail"}},
	{"webhooks", []string{"id", "uuid", "account_id", "url", "event_types", "inbox_ids", "inbox_rows", "description", "enabled", "secret", "created_at", "updated_at"}},
	{"webhook_deliveries", []string{"id", "webhook_id", "event_seq", "status", "attempt", "response_status", "error", "created_at", "last_attempt_at", "next_attempt_at", "delivered_at", "claimed_until", "claim"}},
}

// notCopied are the tables of the schema an import does not fill, and why.
var notCopied = map[string]string{
	"schema_migrations": "written by the migrations the import applies",
	"log_heads":         "set from the copied event log (importedHeads)",
	"index_queue":       "the search indexes are not copied: each process builds its own from the database",
	"change_readers":    "the cursors of search indexes, which are not copied",
}

// Accounted reports whether table is one an import copies or names as not copied.
func Accounted(table string) bool {
	_, skipped := notCopied[table]
	return skipped || slices.ContainsFunc(CopiedTables, func(t CopiedTable) bool { return t.Name == table })
}

// notCopiedColumns are the columns of copied tables that keep their defaults: the leases
// of this store's queues, which no process holds yet.
var notCopiedColumns = map[string][]string{
	"outbound":     {"leased_until", "lease"},
	"triage_queue": {"leased_until"},
}

// importedHeads sets what the copied rows imply: the event log's head and the seq its
// retention dropped through (a setting in SQLite, a column here), and drops the settings
// this store keeps elsewhere or makes afresh. The search store id goes so that an index
// directory built for the source is rebuilt rather than trusted (the change log starts
// empty here). The test controls' state goes too: it is a test run's, not the data's.
const importedHeads = `
UPDATE log_heads SET last = (SELECT COALESCE(MAX(seq), 0) FROM events),
	expired = COALESCE((SELECT convert_from(value, 'UTF8')::bigint FROM settings WHERE name = 'events_expired_through'), 0)
	WHERE name = 'events';
DELETE FROM settings WHERE name IN ('events_expired_through', 'search_store_id', 'test_controls');`

// CopiedRows is how many rows an import copied into one table.
type CopiedRows struct {
	Table string
	Rows  int64
}

// Import creates the schema in the empty database at url and copies into it everything
// src holds, in one transaction: a copy cut off midway (an error, a killed process)
// leaves the database as empty as it was, and a process starting on it meanwhile waits
// for the commit (the migrations' lock). A database that has any table already is refused
// with db.ErrCopyRefused.
func Import(ctx context.Context, url string, src db.CopySource) ([]CopiedRows, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, errBadURL
	}
	cfg.RuntimeParams["timezone"] = "UTC"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var counts []CopiedRows
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := lockMigrations(ctx, tx); err != nil {
			return err
		}
		if err := refuseNonEmpty(ctx, tx); err != nil {
			return err
		}
		names, err := migrationNames()
		if err != nil {
			return err
		}
		if err := applyMigrations(ctx, tx, names); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET CONSTRAINTS ALL DEFERRED"); err != nil {
			return err
		}
		for _, t := range CopiedTables {
			n, err := copyTable(ctx, tx, src, t)
			if err != nil {
				return fmt.Errorf("copy %s: %w", t.Name, err)
			}
			counts = append(counts, CopiedRows{t.Name, n})
		}
		if _, err := tx.Exec(ctx, importedHeads); err != nil {
			return err
		}
		if err := advanceIdentities(ctx, tx); err != nil {
			return err
		}
		// Statistics of the copied rows, in the copy's transaction: a server that starts
		// on the database before autovacuum's first round (about a minute) would plan its
		// queries for empty tables, sorting an inbox's whole list for each page.
		_, err = tx.Exec(ctx, "ANALYZE")
		return err
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// errBadURL answers a URL pgx cannot parse; its own error may quote the URL, password and
// all, so it says only what is wrong.
var errBadURL = errors.New("db: the PostgreSQL URL is not valid (postgres://user:password@host:port/dbname?sslmode=...)")

// refuseNonEmpty refuses a database whose schema has a table: an import never mixes its
// rows with others, nor overwrites a database in use.
func refuseNonEmpty(ctx context.Context, tx pgx.Tx) error {
	var tables int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").Scan(&tables); err != nil {
		return err
	}
	if tables > 0 {
		return fmt.Errorf("%w: the PostgreSQL database is not empty (%d tables in its schema): migrate into a new database (CREATE DATABASE inboxd OWNER inboxd)", db.ErrCopyRefused, tables)
	}
	return nil
}

// copyTable copies the rows src has of t with COPY, converting each value to its column's
// type, and returns how many it copied.
func copyTable(ctx context.Context, tx pgx.Tx, src db.CopySource, t CopiedTable) (int64, error) {
	types, err := columnTypes(ctx, tx, t)
	if err != nil {
		return 0, err
	}
	rows, err := src.CopyRows(ctx, t.Name, t.Columns, chunkSize)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	return tx.CopyFrom(ctx, pgx.Identifier{t.Name}, t.Columns, &convertedRows{CopyRows: rows, types: types})
}

// columnTypes returns the types of t's columns in its order, after checking that t lists
// every column of the table but those left to their defaults.
func columnTypes(ctx context.Context, tx pgx.Tx, t CopiedTable) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, t.Name)
	if err != nil {
		return nil, err
	}
	byName, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		return c, r.Scan(&c[0], &c[1])
	})
	if err != nil {
		return nil, err
	}
	types := make([]string, len(t.Columns))
	for _, c := range byName {
		i := slices.Index(t.Columns, c[0])
		if i < 0 && !slices.Contains(notCopiedColumns[t.Name], c[0]) {
			return nil, fmt.Errorf("column %s is neither copied nor left to its default (import.go)", c[0])
		}
		if i >= 0 {
			types[i] = c[1]
		}
	}
	for i, typ := range types {
		if typ == "" {
			return nil, fmt.Errorf("no column %s in the schema", t.Columns[i])
		}
	}
	return types, nil
}

// convertedRows converts the values of a source to the types of their columns: the
// source may store a flag as an integer and text as bytes.
type convertedRows struct {
	db.CopyRows
	types []string
}

func (c *convertedRows) Values() ([]any, error) {
	vals, err := c.CopyRows.Values()
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		switch {
		case c.types[i] == "boolean":
			if n, ok := v.(int64); ok {
				vals[i] = n != 0
			}
		case c.types[i] == "text":
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		case c.types[i] == "bytea":
			if s, ok := v.(string); ok {
				vals[i] = []byte(s)
			}
		}
	}
	return vals, nil
}

// advanceIdentities moves every identity column's sequence past the copied ids, so that
// new rows never take an id the source gave out.
func advanceIdentities(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return err
	}
	idents, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var c [2]string
		return c, r.Scan(&c[0], &c[1])
	})
	if err != nil {
		return err
	}
	for _, id := range idents {
		table, col := pgx.Identifier{id[0]}.Sanitize(), pgx.Identifier{id[1]}.Sanitize()
		_, err := tx.Exec(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence($1, $2), m)
			FROM (SELECT MAX(%s) AS m FROM %s) AS t WHERE m IS NOT NULL`, col, table), id[0], id[1])
		if err != nil {
			return fmt.Errorf("advance %s.%s: %w", id[0], id[1], err)
		}
	}
	return nil
}
