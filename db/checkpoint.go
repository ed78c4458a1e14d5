package db

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints run beside the writer, not in it. SQLite's default has the connection whose
// commit pushes the WAL past 1,000 pages copy the WAL back into the database and fsync
// both files before its commit returns: with 16 KB pages that is every few dozen commits,
// and each such commit stalls every write queued behind it for tens of milliseconds. So
// no connection checkpoints on commit (driver.go), and the Store runs passive checkpoints
// on a connection of their own: they copy what readers no longer need while the writer
// keeps appending, and once the WAL is wholly copied the next write starts it over.

// checkpointEvery is how often the checkpointer looks for committed writes to copy back.
const checkpointEvery = 250 * time.Millisecond

type checkpointer struct {
	conn    *sql.DB
	commits atomic.Int64 // commits since the last checkpoint
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// startCheckpointer opens the checkpointer's connection and starts it.
func (s *Store) startCheckpointer(ctx context.Context) error {
	conn, err := sql.Open(driverName, s.dsn)
	if err != nil {
		return err
	}
	conn.SetMaxOpenConns(1)
	conn.SetConnMaxLifetime(0)
	if err := conn.PingContext(ctx); err != nil {
		conn.Close()
		return err
	}
	s.ckpt = &checkpointer{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	go s.ckpt.run()
	return nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if c.commits.Swap(0) > 0 {
				// A failure (disk full, I/O error) leaves the WAL longer, never wrong;
				// the next round tries again.
				c.checkpoint()
			}
		}
	}
}

// checkpoint copies committed pages no reader still needs from the WAL into the database.
func (c *checkpointer) checkpoint() (busy bool, walFrames, copied int, err error) {
	err = c.conn.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walFrames, &copied)
	return busy, walFrames, copied, err
}

// committed tells the checkpointer a write transaction committed.
func (c *checkpointer) committed() {
	if c != nil {
		c.commits.Add(1)
	}
}

// close stops the checkpointer (once: a Store may be closed twice); closing the last
// connection checkpoints what is left.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	var err error
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		err = c.conn.Close()
	})
	return err
}
