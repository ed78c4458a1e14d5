package sqlite

import (
	"context"
	"fmt"
)

// Fault is a storage condition imposed on the store, for tests of how the program
// behaves when the disk fills up or the database becomes read-only.
type Fault int

const (
	NoFault       Fault = iota // lift any imposed fault
	FaultFull                  // the file may not grow: writes fail with SQLITE_FULL
	FaultReadOnly              // writes fail with SQLITE_READONLY
)

// SetFault imposes f on the store's one writer connection, or lifts it with NoFault.
// SQLite's own switches do it, so a test needs neither root nor a special filesystem:
// PRAGMA max_page_count capped at the pages in use behaves as a full disk (SQLITE_FULL as
// soon as a write needs a new page), PRAGMA query_only as a read-only file
// (SQLITE_READONLY). Both are per connection and last until lifted.
func (s *Store) SetFault(ctx context.Context, f Fault) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var stmts []string
	switch f {
	case NoFault:
		// The largest page count SQLite allows; it lowers a larger value to its maximum.
		stmts = []string{"PRAGMA query_only = 0", "PRAGMA max_page_count = 4294967294"}
	case FaultFull:
		var pages int64
		if err := conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
			return err
		}
		stmts = []string{fmt.Sprintf("PRAGMA max_page_count = %d", pages)}
	case FaultReadOnly:
		stmts = []string{"PRAGMA query_only = 1"}
	default:
		return fmt.Errorf("db: unknown fault %d", f)
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
