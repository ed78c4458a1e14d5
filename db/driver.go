package db

import (
	"database/sql"

	"github.com/mattn/go-sqlite3"
)

// driverName is go-sqlite3 with the functions the schema uses; writerDriverName is the
// same for the writer connection, which also keeps its temporary files in memory.
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
		_, err := c.Exec("PRAGMA temp_store = MEMORY", nil)
		return err
	}})
}

func registerFuncs(c *sqlite3.SQLiteConn) error {
	if err := c.RegisterFunc("inboxd_body_text", sqlBodyText, true); err != nil {
		return err
	}
	if err := c.RegisterFunc("inboxd_pack_json", sqlPackJSON, true); err != nil {
		return err
	}
	return c.RegisterFunc("inboxd_pack_body", sqlPackBody, true)
}
