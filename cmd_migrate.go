package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
	"github.com/inboxd/inboxd/db/sqlite"
)

// runMigrate moves an SQLite database into an empty PostgreSQL database
// (docs/postgres.md, "Moving from SQLite"): everything a server answers from, in one
// transaction, so that `inboxd serve --db URL` answers as the file did. The search index
// is not copied: each process builds its own from the database at its first start.
func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", stderr)
	from := fs.String("from", "", "the SQLite file to copy (read only; stop the server on it first for a copy of its last state)")
	to := fs.String("to", "", "the empty PostgreSQL database to fill: postgres://user:pass@host:port/dbname?sslmode=...")
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("migrate: unexpected argument %q", fs.Arg(0))}
	}
	if *from == "" || !isDatabaseURL(*to) {
		return usageError{"migrate: give --from FILE (an SQLite database) and --to postgres://... (an empty database)"}
	}
	src, err := sqlite.OpenExport(ctx, *from)
	if err != nil {
		return refusal(err)
	}
	defer src.Close()
	copied, err := postgres.Import(ctx, *to, src)
	if err != nil {
		return refusal(fmt.Errorf("migrate: %w", err))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, c := range copied {
		fmt.Fprintf(tw, "%s\t%d rows\n", c.Table, c.Rows)
	}
	tw.Flush()
	fmt.Fprintf(stderr, "migrated %s to %s; each process builds its search index from it at its first start\n", *from, describeDB(*to))
	return nil
}

// refusal makes a refused migration a usage error (exit status 2): nothing was written.
func refusal(err error) error {
	if errors.Is(err, db.ErrCopyRefused) {
		return usageError{err.Error()}
	}
	return err
}
