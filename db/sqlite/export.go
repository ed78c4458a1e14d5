package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// Export is an SQLite file read for a copy into another store (db.CopySource, `inboxd
// migrate`): every table in the destination's shape, from one snapshot of the file (one
// read transaction), so a server still writing to it does not tear the copy. What this
// file stores in another form than the destination is converted here, one row at a time:
// packed bodies and JSON (body.go) become text, and raw MIME and attachments, whether
// inline or in chunks (chunks.go), become chunks of the destination's size.
type Export struct {
	conn *sql.DB
	tx   *sql.Tx
}

// OpenExport opens the inboxd database at path for an export. It refuses, with
// db.ErrCopyRefused, a path that is not an inboxd database, or one at another schema
// version than this binary's: it never migrates the file it reads.
func OpenExport(ctx context.Context, path string) (*Export, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %v", db.ErrCopyRefused, err)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_query_only=true&_busy_timeout=10000"
	conn, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	e := &Export{conn: conn}
	if err := e.begin(ctx, path); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// begin starts the read transaction and checks that the file is an inboxd database of
// this binary's schema version.
func (e *Export) begin(ctx context.Context, path string) error {
	var version, tables int
	var err error
	e.tx, err = e.conn.BeginTx(ctx, nil)
	if err == nil {
		err = e.tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	}
	if err == nil {
		err = e.tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('settings', 'accounts', 'messages')").Scan(&tables)
	}
	if err != nil {
		return fmt.Errorf("%w: %s is not an SQLite database: %v", db.ErrCopyRefused, path, err)
	}
	if version == 0 || tables != 3 {
		return fmt.Errorf("%w: %s is not an inboxd database", db.ErrCopyRefused, path)
	}
	want, err := schemaVersion()
	if err != nil {
		return err
	}
	if version != want {
		return fmt.Errorf("%w: %s is at schema version %d and this inboxd's is %d: migrate with the inboxd that matches it (an older file is brought up to date by starting this version's `inboxd serve` on it once)",
			db.ErrCopyRefused, path, version, want)
	}
	return nil
}

// schemaVersion is the version the embedded migrations bring a file to.
func schemaVersion() (int, error) {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return 0, err
	}
	last := 0
	for _, e := range entries {
		n, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return 0, fmt.Errorf("migration %s: name must start with its version", e.Name())
		}
		last = max(last, n)
	}
	return last, nil
}

// Close ends the read transaction and closes the file.
func (e *Export) Close() error {
	if e.tx == nil {
		return e.conn.Close()
	}
	return errors.Join(e.tx.Rollback(), e.conn.Close())
}

// CopyRows returns the rows of the destination's table (db.CopySource).
func (e *Export) CopyRows(ctx context.Context, table string, columns []string, chunkSize int) (db.CopyRows, error) {
	switch table {
	case "raw_chunks":
		return e.chunks(ctx, chunkSize, "SELECT id, body FROM messages ORDER BY id", e.rawOfRow)
	case "attachment_chunks":
		return e.chunks(ctx, chunkSize, "SELECT id, chunked, CASE WHEN chunked THEN NULL ELSE content END FROM attachments ORDER BY id", e.attachmentOfRow)
	}
	return e.columns(ctx, table, columns)
}

// exportedAs are the columns of the destination that this file stores in another form:
// the column it reads instead, and how a value of it becomes the destination's.
var exportedAs = map[string]map[string]derivedColumn{
	"messages": {
		"triage":     {"triage_z", unpackedJSON},
		"protection": {"protection_z", unpackedJSON},
		"body_text":  {"body", func(r *rowValues, v any) (any, error) { return r.bodyPart(v, 0) }},
		"body_html":  {"body", func(r *rowValues, v any) (any, error) { return r.bodyPart(v, 1) }},
	},
	"protection_details": {"detail": {"detail_z", unpackedJSON}},
}

type derivedColumn struct {
	from   string
	decode func(r *rowValues, v any) (any, error)
}

func unpackedJSON(_ *rowValues, v any) (any, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, nil // NULL stays NULL
	}
	return unpackJSON(b)
}

// columns reads table's columns, those stored in another form converted.
func (e *Export) columns(ctx context.Context, table string, columns []string) (db.CopyRows, error) {
	derived := exportedAs[table]
	read := make([]string, len(columns))
	for i, c := range columns {
		read[i] = `"` + c + `"`
		if d, ok := derived[c]; ok {
			read[i] = d.from
		}
	}
	rows, err := e.tx.QueryContext(ctx, fmt.Sprintf(`SELECT %s FROM "%s"`, strings.Join(read, ", "), table))
	if err != nil {
		return nil, err
	}
	return &rowValues{rows: rows, columns: columns, derived: derived}, nil
}

// rowValues iterates the rows of one table.
type rowValues struct {
	rows    *sql.Rows
	columns []string
	derived map[string]derivedColumn
	body    []string // the current row's text and HTML, once unpacked
}

func (r *rowValues) Next() bool   { r.body = nil; return r.rows.Next() }
func (r *rowValues) Err() error   { return r.rows.Err() }
func (r *rowValues) Close() error { return r.rows.Close() }

func (r *rowValues) Values() ([]any, error) {
	vals := make([]any, len(r.columns))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := r.rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for i, c := range r.columns {
		if d, ok := r.derived[c]; ok {
			v, err := d.decode(r, vals[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			vals[i] = v
		}
	}
	return vals, nil
}

// bodyPart returns the text (0) or the HTML (1) of the packed body v, unpacking it once a
// row.
func (r *rowValues) bodyPart(v any, part int) (any, error) {
	if r.body == nil {
		b, _ := v.([]byte)
		text, html, _, err := unpackBody(b, false)
		if err != nil {
			return nil, err
		}
		r.body = []string{text, html}
	}
	return r.body[part], nil
}

// rawOfRow returns the key and a reader of the raw bytes of the message of the current
// row of messages (id, body): from the body, or its chunks read one at a time.
func (e *Export) rawOfRow(ctx context.Context, rows *sql.Rows) (int64, io.Reader, func() error, error) {
	var id int64
	var body []byte
	if err := rows.Scan(&id, &body); err != nil {
		return 0, nil, nil, err
	}
	if len(body) == 0 || body[0] != bodyChunked {
		_, _, raw, err := unpackBody(body, true)
		return id, bytes.NewReader(raw), nil, err
	}
	frames, err := e.tx.QueryContext(ctx, "SELECT data FROM raw_chunks WHERE message_id = ? ORDER BY seq", id)
	if err != nil {
		return 0, nil, nil, err
	}
	_, dec := codec()
	return id, &rowsReader{rows: frames, decode: func(b []byte) ([]byte, error) { return dec.DecodeAll(b, nil) }}, frames.Close, nil
}

// attachmentOfRow returns the key and a reader of the bytes of the attachment of the
// current row of attachments (id, chunked, content).
func (e *Export) attachmentOfRow(ctx context.Context, rows *sql.Rows) (int64, io.Reader, func() error, error) {
	var id int64
	var chunked bool
	var content []byte
	if err := rows.Scan(&id, &chunked, &content); err != nil {
		return 0, nil, nil, err
	}
	if !chunked {
		return id, bytes.NewReader(content), nil, nil
	}
	chunks, err := e.tx.QueryContext(ctx, "SELECT data FROM attachment_chunks WHERE attachment_id = ? ORDER BY seq", id)
	if err != nil {
		return 0, nil, nil, err
	}
	return id, &rowsReader{rows: chunks}, chunks.Close, nil
}

// rowsReader reads the byte values of rows one after another, each decoded when decode
// is set.
type rowsReader struct {
	rows   *sql.Rows
	decode func([]byte) ([]byte, error)
	buf    []byte
}

func (r *rowsReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if !r.rows.Next() {
			if err := r.rows.Err(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
		if err := r.rows.Scan(&r.buf); err != nil {
			return 0, err
		}
		if r.decode != nil {
			var err error
			if r.buf, err = r.decode(r.buf); err != nil {
				return 0, fmt.Errorf("%w: %v", errBody, err)
			}
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// openBytes returns the key of the current row of a query, a reader of its bytes and what
// closes that reader (nil when nothing needs to).
type openBytes func(ctx context.Context, rows *sql.Rows) (int64, io.Reader, func() error, error)

// chunks returns rows (key, seq, data) of the bytes open reads for each row of query, in
// chunks of chunkSize bytes numbered from 0: one chunk in memory at a time.
func (e *Export) chunks(ctx context.Context, chunkSize int, query string, open openBytes) (db.CopyRows, error) {
	rows, err := e.tx.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return &chunkRows{ctx: ctx, rows: rows, open: open, size: chunkSize}, nil
}

type chunkRows struct {
	ctx   context.Context
	rows  *sql.Rows
	open  openBytes
	size  int
	key   int64
	r     io.Reader
	close func() error
	seq   int
	cur   []any
	err   error
}

func (c *chunkRows) Next() bool {
	for c.err == nil {
		if c.r == nil {
			if !c.rows.Next() {
				c.err = c.rows.Err()
				return false
			}
			c.key, c.r, c.close, c.err = c.open(c.ctx, c.rows)
			c.seq = 0
			continue
		}
		buf := make([]byte, c.size)
		n, err := io.ReadFull(c.r, buf)
		if err != nil {
			if err = c.endItem(err); err != nil {
				c.err = err
				return false
			}
		}
		if n > 0 {
			c.cur = []any{c.key, c.seq, buf[:n]}
			c.seq++
			return true
		}
	}
	return false
}

// endItem closes the current item's reader; err is what its last read returned, an end
// of the bytes (nil is returned) or a failure.
func (c *chunkRows) endItem(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	if c.close != nil {
		err = errors.Join(err, c.close())
	}
	c.r, c.close = nil, nil
	return err
}

func (c *chunkRows) Values() ([]any, error) { return c.cur, nil }
func (c *chunkRows) Err() error             { return c.err }

func (c *chunkRows) Close() error {
	if c.r != nil {
		c.endItem(io.EOF)
	}
	return c.rows.Close()
}
