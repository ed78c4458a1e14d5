package db

import (
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/google/uuid"
)

// Key prefixes the official clients insist on (API-NOTES section 1).
const (
	AccountKeyPrefix = "bze_"
	MailboxKeyPrefix = "gme_"
)

// Scopes, one per operation (spec section 5).
const (
	ScopeInboxesRead   = "inboxes:read"
	ScopeInboxesWrite  = "inboxes:write"
	ScopeMessagesRead  = "messages:read"
	ScopeMessagesSend  = "messages:send"
	ScopeMessagesWrite = "messages:write"
)

// AllScopes lists every scope, the set a full-access account key holds.
func AllScopes() []string {
	return []string{ScopeInboxesRead, ScopeInboxesWrite, ScopeMessagesRead, ScopeMessagesSend, ScopeMessagesWrite}
}

// MaxActiveKeys is how many unexpired, unrevoked account keys one account may hold.
const MaxActiveKeys = 20

// Key lifetimes in days (API-NOTES section 1).
const (
	DefaultKeyDays = 30
	MaxKeyDays     = 365
)

// Principal is who a request acts as, resolved from its bearer key.
type Principal struct {
	AccountID string
	Mailbox   bool     // a mailbox key: one inbox, allow-list instead of scopes
	Scopes    []string // account keys only
	InboxID   int64    // mailbox keys only: the assigned inbox row
}

// HasScope reports whether an account key holds scope.
func (p *Principal) HasScope(scope string) bool {
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// NewKey is a key to store. Token is the full secret; only its hash is kept.
type NewKey struct {
	AccountID    string
	Token        string
	Scopes       []string   // account keys
	InboxAddress string     // mailbox keys
	ExpiresAt    *time.Time // account keys; nil never expires
	// Replace, for a mailbox key, revokes the inbox's other mailbox keys: a mailbox key
	// lasts until it is replaced (API-NOTES section 1). Fixtures leave it unset, so every
	// key a fixture names works.
	Replace bool
}

// GenerateAccountToken returns a fresh account key: bze_<uuid>.<43 base64url chars>.
func GenerateAccountToken() string { return AccountKeyPrefix + uuid.NewString() + "." + randomPart() }

// GenerateMailboxToken returns a fresh mailbox key for the inbox with the given uuid.
func GenerateMailboxToken(inboxUUID string) string {
	return MailboxKeyPrefix + inboxUUID + "." + randomPart()
}

func randomPart() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidScope reports whether s is one of AllScopes.
func ValidScope(s string) bool {
	for _, v := range AllScopes() {
		if v == s {
			return true
		}
	}
	return false
}
