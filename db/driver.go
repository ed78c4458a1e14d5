package db

import (
	"database/sql"
	"fmt"

	"github.com/mattn/go-sqlite3"
)

// walSizeLimit is the size a WAL file is cut back to when it starts over.
const walSizeLimit = 64 << 20

// driverName is go-sqlite3 with the functions the schema uses.
const driverName = "sqlite3_inboxd"

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		// No connection checkpoints on commit: the Store's checkpointer does, beside the
		// writer (checkpoint.go). A WAL that starts over is cut back to walSizeLimit, so a
		// burst of writes does not leave a large file behind.
		if _, err := c.Exec(fmt.Sprintf("PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = %d", walSizeLimit), nil); err != nil {
			return err
		}
		if err := c.RegisterFunc("inboxd_body_text", sqlBodyText, true); err != nil {
			return err
		}
		if err := c.RegisterFunc("inboxd_pack_json", sqlPackJSON, true); err != nil {
			return err
		}
		return c.RegisterFunc("inboxd_pack_body", sqlPackBody, true)
	}})
}
