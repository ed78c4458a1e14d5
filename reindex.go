package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/inboxd/inboxd/search"
	"github.com/inboxd/inboxd/server"
)

// indexPath is the search index directory of a database: beside it, named after it.
func indexPath(dbPath string) string { return dbPath + ".index" }

// runReindex rebuilds the search index from the database: a progress line on a terminal,
// and the final count.
func runReindex(ctx context.Context, args []string, stdout, stderr io.Writer, rt runtimeTuning) error {
	fs := newFlagSet("reindex", stderr)
	path := fs.String("db", "inboxd.db", dbFlagHelp)
	dataDir := fs.String("data-dir", "inboxd-data", dataDirFlagHelp)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("reindex: unexpected argument %q", fs.Arg(0))}
	}
	store, err := openExisting(ctx, "reindex", *path)
	if err != nil {
		return err
	}
	defer store.Close()
	local, err := localBase(*path, *dataDir)
	if err != nil {
		return err
	}
	rt.collectLessOften()
	tty := isTerminal(stdout)
	start := time.Now()
	var last time.Time
	progress := func(done, total int64) {
		if !tty || time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		pct := 100.0
		if total > 0 {
			pct = float64(done) * 100 / float64(total)
		}
		const width = 30
		bar := int(pct / 100 * width)
		fmt.Fprintf(stdout, "\r[%-*s] %3.0f%% %d/%d messages, %.0f/s ", width, repeat('#', min(bar, width)), pct, done, total,
			float64(done)/time.Since(start).Seconds())
	}
	n, err := search.Rebuild(ctx, indexPath(local), server.SearchSource(store), progress)
	if tty {
		fmt.Fprint(stdout, "\r\033[K")
	}
	if err != nil {
		return fmt.Errorf("reindex: %w", err)
	}
	el := time.Since(start)
	fmt.Fprintf(stdout, "reindexed %d messages in %.1fs (%.0f messages/s) into %s\n", n, el.Seconds(), float64(n)/el.Seconds(), indexPath(local))
	return nil
}

func repeat(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// isTerminal reports whether w is a character device (a terminal), where a progress line
// that rewrites itself is welcome.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
