package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/inboxd/inboxd/db"
)

// hookCache keeps each account's enabled webhooks as the database has them committed, for
// the fan-out (db.RecordEvent), which asks for them with every event it records: reading
// and decoding the rows was most of what a recorded event cost beyond its own row.
//
// The deliveries are exact (migration 0015): an event committed after a webhook's change
// must be fanned out by the changed webhook, and one committed before it by the old. Only
// units of work change webhooks (InsertWebhook, SaveWebhook, DeleteWebhook), and they all
// run one after another on the committer (write.go), as do the fan-outs; a change is seen
// by the writes after it in its group, which then read the transaction rather than the
// cache, and the cache keeps nothing until the group has committed or rolled back. A read
// is kept only when no write of its group changed webhooks: it is then the committed state,
// whether the group commits or not. Another process may write the database too (`inboxd
// seed` beside a running server loads webhooks): SQLite's data_version on the writer's
// connection changes exactly when another connection has committed, and each group reads it
// once it holds the write lock (groupStarted), so what another process committed before the
// group is read from the database. (PostgreSQL reads them in the round trip that appends the
// event, under the log lock, and keeps no such cache.)
type hookCache struct {
	mu        sync.Mutex
	byAccount map[string][]db.Webhook
	// changing: a write of the current group changed webhooks; the transaction is read,
	// and nothing is kept, until the group ends.
	changing bool
	version  int64 // the writer connection's data_version when the cache was last checked
}

// hookCacheMax bounds the accounts kept; past it the cache starts over.
const hookCacheMax = 10000

// get returns an account's enabled webhooks when kept. The slice is shared: callers
// only read it.
func (c *hookCache) get(accountID string) ([]db.Webhook, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changing {
		return nil, false
	}
	hooks, ok := c.byAccount[accountID]
	return hooks, ok
}

// put keeps what a write read of an account's enabled webhooks, unless its group changed
// webhooks before the read.
func (c *hookCache) put(accountID string, hooks []db.Webhook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changing {
		return
	}
	if c.byAccount == nil || len(c.byAccount) >= hookCacheMax {
		c.byAccount = map[string][]db.Webhook{}
	}
	c.byAccount[accountID] = hooks
}

// change notes that a write of the current group changes webhooks.
func (c *hookCache) change() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changing, c.byAccount = true, nil
}

// groupStarted is told by the committer once a group's transaction holds the write lock:
// when another connection has committed since the last group, the cache is emptied. If
// data_version cannot be read, the group keeps nothing and reads the database.
func (c *hookCache) groupStarted(ctx context.Context, tx *sql.Tx) {
	var v int64
	err := tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		c.changing, c.byAccount = true, nil // until the group ends
	case v != c.version:
		c.version, c.byAccount = v, nil
	}
}

// groupEnded is told by the committer once a group has committed or rolled back.
func (c *hookCache) groupEnded() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changing {
		c.changing, c.byAccount = false, nil
	}
}
