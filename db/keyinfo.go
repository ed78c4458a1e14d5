package db

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// KeyInfo is what an operator sees of a key (`inboxd keys list`): never its token.
type KeyInfo struct {
	KeyID     string
	Prefix    string // the token's first characters, to recognise it
	AccountID string
	Mailbox   bool
	Scopes    []string // account keys
	Inbox     string   // mailbox keys: the inbox's address
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// Status is "revoked", "expired" or "active" at now.
func (k KeyInfo) Status(now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return "expired"
	}
	return "active"
}

// keyIDPrefix starts every key id, so that one is not mistaken for a token.
const keyIDPrefix = "key_"

// KeyIDOf is the public id of the key whose token hashes (SHA-256) to hash: it names a
// key to list or revoke without its secret, and anyone who holds the token can compute
// it. A mailbox key's token names its inbox, not itself, so the id comes from the hash.
func KeyIDOf(hash []byte) string { return keyIDPrefix + hex.EncodeToString(hash[:8]) }

// KeyIDOfToken is KeyIDOf the token's hash.
func KeyIDOfToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return KeyIDOf(h[:])
}

// ParseKeyID returns the hash prefix a key id stands for.
//
// Errors: invalid_argument (naming keyId).
func ParseKeyID(id string) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(id, keyIDPrefix))
	if err != nil || len(b) != 8 || !strings.HasPrefix(id, keyIDPrefix) {
		return nil, Errorf(ECodeInvalidArgument, "keyId: %q is not a key id (key_ and 16 hex digits)", id)
	}
	return b, nil
}

// ScanKeyInfo decodes a key row as operators see it: hash, prefix, account, kind, scopes
// (space separated), inbox address, created, expires and revoked (milliseconds; the
// last two NULL when unset).
func ScanKeyInfo(r RowScanner) (KeyInfo, error) {
	var (
		k                KeyInfo
		hash             []byte
		kind, scopes     string
		created          int64
		expires, revoked *int64
	)
	if err := r.Scan(&hash, &k.Prefix, &k.AccountID, &kind, &scopes, &k.Inbox, &created, &expires, &revoked); err != nil {
		return k, err
	}
	k.KeyID, k.Mailbox, k.Scopes = KeyIDOf(hash), kind == "mailbox", strings.Fields(scopes)
	k.CreatedAt = FromMillis(created).Time
	k.ExpiresAt, k.RevokedAt = OptionalMillis(expires), OptionalMillis(revoked)
	return k, nil
}

// ScanKeyInfos reads key rows (ScanKeyInfo), in order; no rows is the empty list.
func ScanKeyInfos(rows Rows) ([]KeyInfo, error) { return ScanList(rows, ScanKeyInfo) }

// OptionalMillis is a nullable stored millisecond timestamp as a time in UTC, or nil.
func OptionalMillis(ms *int64) *time.Time {
	if ms == nil {
		return nil
	}
	t := FromMillis(*ms).Time
	return &t
}
