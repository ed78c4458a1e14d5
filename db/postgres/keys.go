package postgres

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"slices"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// Keys are resolved through the process's cache (cache.go), which every change to keys,
// accounts or inboxes, by any process, empties: a key revoked, an account disabled or an
// inbox deleted stops its keys on every process (extensions section 9).

// KeyOwner returns the account a token is a key of, or "" when there is no such key.
func (s *Store) KeyOwner(ctx context.Context, token string) (string, error) {
	owner, err := keyOwner(ctx, s.pool, token)
	return owner, storageError(err)
}

func keyOwner(ctx context.Context, q querier, token string) (string, error) {
	var owner string
	err := q.QueryRow(ctx, "SELECT account_id FROM keys WHERE hash = $1", hashToken(token)).Scan(&owner)
	if noRows(err) {
		return "", nil
	}
	return owner, err
}

// ActiveAccountKeys counts an account's account keys that are neither revoked nor expired.
func (s *Store) ActiveAccountKeys(ctx context.Context, accountID string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, activeAccountKeysSQL, accountID, millis(s.Now())).Scan(&n)
	return n, storageError(err)
}

// Authenticate resolves a bearer token.
//
// Errors: unauthorized (missing, malformed, unknown, expired or revoked key),
// access_denied (the account is disabled).
func (s *Store) Authenticate(ctx context.Context, token string) (*db.Principal, error) {
	if err := db.CheckTokenShape(token); err != nil {
		return nil, err
	}
	hash := hashToken(token)
	k, ok := s.cache.keys.get([sha256.Size]byte(hash))
	if !ok {
		gen := s.cache.keys.generation()
		var err error
		if k, err = s.storedKey(ctx, hash); err != nil {
			return nil, err
		}
		s.cache.keys.put([sha256.Size]byte(hash), gen, k)
	}
	// Resolved on every use: expiry is a matter of the clock, not of a change.
	p, err := k.Resolve(s.Now())
	if err != nil {
		return nil, err
	}
	p.Scopes = slices.Clone(p.Scopes)
	return p, nil
}

// storedKey loads the key with hash want.
func (s *Store) storedKey(ctx context.Context, want []byte) (db.StoredKey, error) {
	var (
		k                db.StoredKey
		stored           []byte
		kind, scopes     string
		inboxID          *int64
		expires, revoked *int64
	)
	err := s.pool.QueryRow(ctx, `SELECT k.hash, k.account_id, k.kind, k.scopes, k.inbox_id, k.expires_at, k.revoked_at, a.disabled
		FROM keys k JOIN accounts a ON a.id = k.account_id WHERE k.hash = $1`, want).
		Scan(&stored, &k.Principal.AccountID, &kind, &scopes, &inboxID, &expires, &revoked, &k.Disabled)
	if noRows(err) {
		return k, db.UnknownKey()
	}
	if err != nil {
		return k, storageError(err)
	}
	// The row was found through an index on the hash; the compare is constant-time anyway
	// so that no code path compares key material byte by byte.
	if subtle.ConstantTimeCompare(stored, want) != 1 {
		return k, db.UnknownKey()
	}
	k.ExpiresAt = db.OptionalMillis(expires)
	k.Revoked = revoked != nil
	k.Principal.Mailbox = kind == "mailbox"
	if inboxID != nil {
		k.Principal.InboxID = *inboxID
	}
	if scopes != "" {
		k.Principal.Scopes = strings.Fields(scopes)
	}
	return k, nil
}

// keyInfoQuery reads keys as operators see them (db.KeyInfo).
const keyInfoQuery = `SELECT k.hash, k.prefix, k.account_id, k.kind, k.scopes, COALESCE(i.address, ''), k.created_at, k.expires_at, k.revoked_at
	FROM keys k LEFT JOIN inboxes i ON i.id = k.inbox_id`

// ListKeys returns the keys of an account ("": every account), oldest first.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]db.KeyInfo, error) {
	q, args := keyInfoQuery+" ORDER BY k.id", []any{}
	if accountID != "" {
		q, args = keyInfoQuery+" WHERE k.account_id = $1 ORDER BY k.id", []any{accountID}
	}
	out, err := queryKeyInfo(ctx, s.pool, q, args...)
	return out, storageError(err)
}

func queryKeyInfo(ctx context.Context, q querier, sql string, args ...any) ([]db.KeyInfo, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanKeyInfos(rows)
}

// RevokeKey revokes the key with id keyID (db.KeyIDOf: the first 8 bytes of its hash) at
// the store's now; one revoked before keeps its time. Every process stops trusting it
// once the change's notification arrives (cache.go).
//
// Errors: invalid_argument (not a key id), not_found.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (*db.KeyInfo, error) {
	prefix, err := db.ParseKeyID(keyID)
	if err != nil {
		return nil, err
	}
	var out []db.KeyInfo
	err = s.write(ctx, func(w *wtx) error {
		if err := w.authChanged(); err != nil {
			return err
		}
		if _, err := w.exec("UPDATE keys SET revoked_at = COALESCE(revoked_at, $1) WHERE substr(hash, 1, 8) = $2", millis(w.now), prefix); err != nil {
			return err
		}
		out, err = queryKeyInfo(w.ctx, w.q(), keyInfoQuery+" WHERE substr(k.hash, 1, 8) = $1", prefix)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, db.Errorf(db.ECodeNotFound, "key %s not found", keyID)
	}
	return &out[0], nil
}
