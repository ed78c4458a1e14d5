package sqlite

import (
	"time"

	"github.com/inboxd/inboxd/db"
)

func fromMillis(ms int64) db.Time { return db.FromMillis(ms) }

func millis(t time.Time) int64 { return t.UnixMilli() }
