package db

import (
	"database/sql"

	"github.com/mattn/go-sqlite3"
)

// driverName is go-sqlite3 with the functions the schema uses.
const driverName = "sqlite3_inboxd"

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if err := c.RegisterFunc("inboxd_body_text", sqlBodyText, true); err != nil {
			return err
		}
		if err := c.RegisterFunc("inboxd_pack_json", sqlPackJSON, true); err != nil {
			return err
		}
		return c.RegisterFunc("inboxd_pack_body", sqlPackBody, true)
	}})
}
