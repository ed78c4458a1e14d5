package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
	"github.com/inboxd/inboxd/db/storetest"
)

// The SQLite store keeps the contract every store keeps.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) db.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlite.Options{Now: now})
		qt.Assert(t, err, qt.IsNil)
		t.Cleanup(func() { s.Close() })
		return s
	})
}
