package postgres_test

import (
	"testing"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres/pgtest"
	"github.com/inboxd/inboxd/db/storetest"
)

// The PostgreSQL store keeps the contract every store keeps, each test on a database of
// its own.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) db.Store {
		return open(t, pgtest.NewDatabase(t), now)
	})
}
