package db

import (
	"context"
	"errors"
)

// Moving a database from one store to another (`inboxd migrate`): the destination names
// its tables and columns (postgres.CopiedTables, next to its schema), and the source
// answers each table's rows in that shape, one row at a time, so neither side holds a
// whole table or a whole large message in memory.

// CopySource is a database read for a copy into another store.
type CopySource interface {
	// CopyRows returns the rows of the destination's table, each value in the order of
	// columns. Large byte values (raw MIME, attachments) come as rows of chunks of at most
	// chunkSize bytes, numbered from 0, as the destination stores them.
	CopyRows(ctx context.Context, table string, columns []string, chunkSize int) (CopyRows, error)
}

// CopyRows iterates the rows of one table (the shape of pgx.CopyFromSource).
type CopyRows interface {
	Next() bool
	Values() ([]any, error)
	Err() error
	Close() error
}

// ErrCopyRefused wraps the reasons a copy does not start: a source that is not a database
// of this version, a destination that is not empty. Nothing was written when it is
// returned.
var ErrCopyRefused = errors.New("migrate refused")
