package sqlite

import (
	"database/sql"
	"fmt"

	"github.com/mattn/go-sqlite3"
)

// driverName is go-sqlite3 with the functions the schema uses; writerDriverName is the
// same for the writer connection, which also keeps its temporary files in memory and
// checkpoints less often.
const (
	driverName       = "sqlite3_inboxd"
	writerDriverName = "sqlite3_inboxd_writer"
)

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: registerFuncs})
	sql.Register(writerDriverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if err := registerFuncs(c); err != nil {
			return err
		}
		// Every write runs in a savepoint of its own (write.go), and SQLite copies each
		// page a savepoint modifies, before the change, into a sub-journal: with 16 KB
		// pages that file took more bytes of write(2) than the WAL itself, two system
		// calls a page. In memory it is a copy and nothing else. It holds one write's
		// pages at a time (it is emptied when the savepoint is released), so it stays
		// small; the readers keep the default, as a large sort there should spill.
		if _, err := c.Exec("PRAGMA temp_store = MEMORY", nil); err != nil {
			return err
		}
		// The writer checkpoints the WAL into the file when a commit leaves it past this
		// many pages (SQLite's default is 1,000, 8 MB of 8 KB pages). Every writer waits
		// while it does, mostly for the two fsyncs: fewer, larger checkpoints spend less
		// time waiting in all. Measured on the bench database (scripts/bench --keep, SMTP
		// ingest of 12,000 2 KB messages, four runs each, in turns): alone 1,844-2,167
		// msg/s at 1,000 pages (mean 1,951), 1,950-2,088 at 4,000 (2,030); beside a
		// search loop 1,324-1,475 (1,401) against 1,450-1,562 (1,508). The transfers'
		// p99 rose from 15-18 to 26-32 ms (the longer checkpoints), and the WAL file
		// grows to ~32 MB instead of ~8.
		_, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", walCheckpointPages), nil)
		return err
	}})
}

// walCheckpointPages is the WAL size, in pages, past which the writer checkpoints (see
// the writer's connect hook).
const walCheckpointPages = 4000

func registerFuncs(c *sqlite3.SQLiteConn) error {
	if err := c.RegisterFunc("inboxd_body_text", sqlBodyText, true); err != nil {
		return err
	}
	if err := c.RegisterFunc("inboxd_pack_json", sqlPackJSON, true); err != nil {
		return err
	}
	return c.RegisterFunc("inboxd_pack_body", sqlPackBody, true)
}
