package sqlite

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// KeyOwner, LiveInboxOf, RevokeMailboxKeys, ActiveAccountKeys and InsertKey are what
// db.CreateKey reads and writes. A unit that changes keys clears the auth cache once it is
// done (Update): keys, accounts and mailbox keys decide who a key is.

func (u *unit) KeyOwner(token string) (string, error) { return keyOwner(u.ctx, u.tx, token) }

func (u *unit) LiveInboxOf(accountID, address string) (int64, bool, error) {
	var id int64
	err := u.tx.QueryRowContext(u.ctx, "SELECT id FROM inboxes WHERE address = ? AND account_id = ? AND retired_at IS NULL",
		address, accountID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

func (u *unit) RevokeMailboxKeys(inboxID int64) error {
	u.keysChanged = true
	_, err := u.tx.ExecContext(u.ctx, "UPDATE keys SET revoked_at = ? WHERE inbox_id = ? AND kind = 'mailbox' AND revoked_at IS NULL",
		millis(u.now), inboxID)
	return err
}

func (u *unit) ActiveAccountKeys(accountID string) (int, error) {
	var active int
	err := u.tx.QueryRowContext(u.ctx, activeAccountKeysSQL, accountID, millis(u.now)).Scan(&active)
	return active, err
}

func (u *unit) InsertKey(k db.NewKey, inboxID int64) error {
	u.keysChanged = true
	kind, inbox := "account", sql.NullInt64{}
	if inboxID != 0 {
		kind, inbox = "mailbox", sql.NullInt64{Int64: inboxID, Valid: true}
	}
	var expires sql.NullInt64
	if k.ExpiresAt != nil {
		expires = sql.NullInt64{Int64: millis(*k.ExpiresAt), Valid: true}
	}
	prefix := k.Token[:min(len(k.Token), 12)]
	_, err := u.tx.ExecContext(u.ctx, `INSERT INTO keys(account_id, kind, hash, prefix, scopes, inbox_id, expires_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		k.AccountID, kind, hashToken(k.Token), prefix, strings.Join(k.Scopes, " "), inbox, expires, millis(u.now))
	return err
}

func keyOwner(ctx context.Context, q rowQuerier, token string) (string, error) {
	var owner string
	err := q.QueryRowContext(ctx, "SELECT account_id FROM keys WHERE hash = ?", hashToken(token)).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// KeyOwner returns the account a token is a key of, or "" when the store has no such
// key (a fixture checks it before writing anything).
func (s *Store) KeyOwner(ctx context.Context, token string) (string, error) {
	owner, err := keyOwner(ctx, s.r, token)
	return owner, storageError(err)
}

// ActiveAccountKeys counts an account's account keys that are neither revoked nor
// expired: db.CreateKey refuses one past MaxActiveKeys.
func (s *Store) ActiveAccountKeys(ctx context.Context, accountID string) (int, error) {
	var active int
	err := s.r.QueryRowContext(ctx, activeAccountKeysSQL, accountID, millis(s.Now())).Scan(&active)
	return active, err
}

const activeAccountKeysSQL = `SELECT COUNT(*) FROM keys WHERE account_id = ? AND kind = 'account'
	AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`

// Authenticate resolves a bearer token.
//
// Errors: unauthorized (missing, malformed, unknown, expired or revoked key),
// access_denied (the account is disabled).
func (s *Store) Authenticate(ctx context.Context, token string) (*db.Principal, error) {
	if err := db.CheckTokenShape(token); err != nil {
		return nil, err
	}
	want := hashToken(token)
	if p, ok := s.auth.get(want, millis(s.Now())); ok {
		return p, nil
	}
	gen := s.auth.generation()
	k, expires, err := s.storedKey(ctx, want)
	if err != nil {
		return nil, err
	}
	p, err := k.Resolve(s.Now())
	if err != nil {
		return nil, err
	}
	s.auth.put(want, gen, p, expires)
	return p, nil
}

// storedKey loads the key with hash want, and its expiry as stored (for the auth cache).
func (s *Store) storedKey(ctx context.Context, want []byte) (db.StoredKey, sql.NullInt64, error) {
	var (
		k       db.StoredKey
		stored  []byte
		kind    string
		scopes  string
		inboxID sql.NullInt64
		expires sql.NullInt64
		revoked sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx, `SELECT k.hash, k.account_id, k.kind, k.scopes, k.inbox_id, k.expires_at, k.revoked_at, a.disabled
		FROM keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = +?`, want).
		Scan(&stored, &k.Principal.AccountID, &kind, &scopes, &inboxID, &expires, &revoked, &k.Disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return k, expires, db.UnknownKey()
	}
	if err != nil {
		return k, expires, storageError(err)
	}
	// The row was found through an index on the hash; the compare is constant-time anyway
	// so that no code path compares key material byte by byte.
	if subtle.ConstantTimeCompare(stored, want) != 1 {
		return k, expires, db.UnknownKey()
	}
	if expires.Valid {
		at := time.UnixMilli(expires.Int64)
		k.ExpiresAt = &at
	}
	k.Revoked = revoked.Valid
	k.Principal.Mailbox = kind == "mailbox"
	k.Principal.InboxID = inboxID.Int64
	if scopes != "" {
		k.Principal.Scopes = strings.Fields(scopes)
	}
	return k, expires, nil
}

// authCacheTTL bounds how long a resolved key is trusted without asking the database.
// Changes this process makes (a mailbox key deleted with its inbox, a new key, an account
// changed) clear the cache at once; the TTL bounds changes made to the file by another
// process (inboxd keys, inboxd accounts, inboxd seed) or by hand: the contract's second
// for a revocation on another process of the database (extensions section 6). A key in
// use costs one lookup a second.
const authCacheTTL = time.Second

// authCacheMax bounds the cache; past it the cache starts over.
const authCacheMax = 10000

// authCache maps a key's SHA-256 to the principal it resolved to: every API request
// authenticates, and the answer rarely changes. Only keys that resolved are kept.
type authCache struct {
	mu  sync.RWMutex
	gen uint64
	m   map[[sha256.Size]byte]authEntry
}

type authEntry struct {
	p       db.Principal
	expires sql.NullInt64 // the key's own expiry, checked on every use
	until   time.Time     // end of trust in this entry
}

func (c *authCache) get(hash []byte, now int64) (*db.Principal, bool) {
	c.mu.RLock()
	e, ok := c.m[[sha256.Size]byte(hash)]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.until) || (e.expires.Valid && e.expires.Int64 <= now) {
		return nil, false
	}
	p := e.p
	return &p, true
}

func (c *authCache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen
}

// put keeps p unless the cache was invalidated since gen was read: the lookup may have
// seen the state before that change.
func (c *authCache) put(hash []byte, gen uint64, p *db.Principal, expires sql.NullInt64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if c.m == nil || len(c.m) >= authCacheMax {
		c.m = map[[sha256.Size]byte]authEntry{}
	}
	c.m[[sha256.Size]byte(hash)] = authEntry{p: *p, expires: expires, until: time.Now().Add(authCacheTTL)}
}

// invalidate forgets every cached key; call it after a change to keys, accounts or inboxes.
func (c *authCache) invalidate() {
	c.mu.Lock()
	c.gen++
	c.m = nil
	c.mu.Unlock()
}

// keyInfoQuery reads keys as operators see them (db.KeyInfo), oldest first.
const keyInfoQuery = `SELECT k.hash, k.prefix, k.account_id, k.kind, k.scopes, COALESCE(i.address, ''), k.created_at, k.expires_at, k.revoked_at
	FROM keys k LEFT JOIN inboxes i ON i.id = k.inbox_id`

// ListKeys returns the keys of an account ("": every account), oldest first.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]db.KeyInfo, error) {
	q, args := keyInfoQuery+" ORDER BY k.id", []any{}
	if accountID != "" {
		q, args = keyInfoQuery+" WHERE k.account_id = +? ORDER BY k.id", []any{accountID}
	}
	var out []db.KeyInfo
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		out, err = queryKeyInfo(ctx, tx, q, args...)
		return err
	})
	return out, err
}

func queryKeyInfo(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]db.KeyInfo, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanKeyInfos(rows)
}

// RevokeKey revokes the key with id keyID (db.KeyIDOf: the first 8 bytes of its hash)
// at the store's now; one revoked before keeps its time. The auth cache forgets every key
// at once; another process sharing the file stops trusting it within authCacheTTL.
//
// Errors: invalid_argument (not a key id), not_found.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (*db.KeyInfo, error) {
	prefix, err := db.ParseKeyID(keyID)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	var out []db.KeyInfo
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "UPDATE keys SET revoked_at = COALESCE(revoked_at, ?) WHERE substr(hash, 1, 8) = ?", millis(now), prefix); err != nil {
			return err
		}
		out, err = queryKeyInfo(ctx, tx, keyInfoQuery+" WHERE substr(k.hash, 1, 8) = ?", prefix)
		return err
	})
	s.auth.invalidate()
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, db.Errorf(db.ECodeNotFound, "key %s not found", keyID)
	}
	return &out[0], nil
}
