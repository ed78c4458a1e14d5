package postgres

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Every API request resolves its key and, most, an inbox by address; both rarely change.
// So each process caches them, and every change to keys, accounts or inboxes, by any
// process, empties every process's caches: the transaction that makes it sends a
// notification on chanAuth (wtx.authChanged), which each process's listener hears once it
// commits (log.go), and the process that made it empties its own at once. A revoked key,
// a disabled account or a retired inbox is thus refused everywhere within the time a
// notification takes to arrive. A process whose listener lost its connection empties its
// caches when it is back (notifications sent meanwhile are lost), and an entry is trusted
// for cacheTTL at most, which bounds what any missed notification could cost.

// cacheTTL bounds how long a cached key or inbox is used.
const cacheTTL = 5 * time.Second

// cacheMax bounds a cache; past it the cache starts over.
const cacheMax = 10000

// chanAuth is the channel of changes to keys, accounts and inboxes.
const chanAuth = "inboxd_auth"

// cache maps keys to values read from the database, forgotten all at once by invalidate.
type cache[K comparable, V any] struct {
	mu  sync.RWMutex
	gen uint64
	m   map[K]cacheEntry[V]
}

type cacheEntry[V any] struct {
	v     V
	until time.Time
}

func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.until) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// generation is read before the database: put keeps a value only if no invalidate came in
// between, since the read may have seen the state before that change.
func (c *cache[K, V]) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

func (c *cache[K, V]) put(k K, gen uint64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.m == nil || len(c.m) >= cacheMax {
		c.m = map[K]cacheEntry[V]{}
	}
	c.m[k] = cacheEntry[V]{v: v, until: time.Now().Add(cacheTTL)}
}

func (c *cache[K, V]) invalidate() {
	c.mu.Lock()
	c.gen++
	c.m = nil
	c.mu.Unlock()
}

// caches are a process's caches of keys (by the SHA-256 of the token) and of inboxes (by
// address).
type caches struct {
	keys    cache[[sha256.Size]byte, db.StoredKey]
	inboxes cache[string, db.Inbox]
}

// invalidate empties both.
func (c *caches) invalidate() {
	c.keys.invalidate()
	c.inboxes.invalidate()
}

// authChanged notes that w changes keys, accounts or inboxes: every process empties its
// caches once w commits.
func (w *wtx) authChanged() error { return w.notify(chanAuth) }
