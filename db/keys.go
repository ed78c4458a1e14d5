package db

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"
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
func GenerateAccountToken() string { return AccountKeyPrefix + newUUID() + "." + randomPart() }

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

// CreateKey stores a key. Storing a key that already exists for the same account is a
// no-op, so loading a fixture twice changes nothing. A mailbox key with Replace revokes
// the inbox's other mailbox keys; an account key past MaxActiveKeys is refused.
//
// Errors: invalid_argument (bad prefix, scopes or inbox, or a key of another account),
// not_found (account or inbox), key_limit (MaxActiveKeys active account keys).
func CreateKey(ctx context.Context, st Units, k NewKey) error {
	if err := checkNewKey(k); err != nil {
		return err
	}
	return st.Update(ctx, func(tx Tx) error {
		owner, err := tx.KeyOwner(k.Token)
		switch {
		case err != nil:
			return err
		case owner == k.AccountID:
			return nil
		case owner != "":
			return Errorf(ECodeInvalidArgument, "token: this key already belongs to another account")
		}
		if err := checkAccountExists(tx, k.AccountID); err != nil {
			return err
		}
		if k.mailbox() {
			return insertMailboxKey(tx, k)
		}
		if err := checkKeyLimit(tx, k.AccountID); err != nil {
			return err
		}
		return tx.InsertKey(k, 0)
	})
}

func (k NewKey) mailbox() bool { return strings.HasPrefix(k.Token, MailboxKeyPrefix) }

// checkNewKey refuses a key whose shape is wrong, before anything is read.
func checkNewKey(k NewKey) error {
	if !k.mailbox() && !strings.HasPrefix(k.Token, AccountKeyPrefix) {
		return Errorf(ECodeInvalidArgument, "token: must start with %s or %s", AccountKeyPrefix, MailboxKeyPrefix)
	}
	if len(k.Token) < 16 || len(k.Token) > 512 {
		return Errorf(ECodeInvalidArgument, "token: must be 16 to 512 characters")
	}
	if k.mailbox() {
		if k.InboxAddress == "" {
			return Errorf(ECodeInvalidArgument, "inbox: a %s key needs an inbox", MailboxKeyPrefix)
		}
		return nil
	}
	if len(k.Scopes) == 0 {
		return Errorf(ECodeInvalidArgument, "scopes: an account key needs at least one scope")
	}
	seen := map[string]bool{}
	for _, sc := range k.Scopes {
		if !ValidScope(sc) {
			return Errorf(ECodeInvalidArgument, "scopes: unknown scope %q", sc)
		}
		if seen[sc] {
			return Errorf(ECodeInvalidArgument, "scopes: %s is given twice", sc)
		}
		seen[sc] = true
	}
	return nil
}

// NewAccountKey is a fresh account key of an account with scopes, valid days from now.
func NewAccountKey(accountID string, scopes []string, days int, now time.Time) NewKey {
	exp := now.AddDate(0, 0, days)
	return NewKey{AccountID: accountID, Token: GenerateAccountToken(), Scopes: scopes, ExpiresAt: &exp}
}

// NewMailboxKey is a fresh mailbox key of an inbox; with replace it revokes the inbox's
// other mailbox keys when it is stored.
func NewMailboxKey(in *Inbox, replace bool) NewKey {
	return NewKey{AccountID: in.AccountID, Token: GenerateMailboxToken(in.UUID), InboxAddress: in.Address, Replace: replace}
}

func checkAccountExists(tx Tx, accountID string) error {
	ok, err := tx.AccountExists(accountID)
	if err == nil && !ok {
		err = Errorf(ECodeNotFound, "account %s not found", accountID)
	}
	return err
}

// insertMailboxKey stores a key of one live inbox of the account, revoking the inbox's
// others when it replaces them.
func insertMailboxKey(tx Tx, k NewKey) error {
	inboxID, ok, err := tx.LiveInboxOf(k.AccountID, strings.ToLower(k.InboxAddress))
	if err != nil {
		return err
	}
	if !ok {
		return Errorf(ECodeNotFound, "inbox %s not found in account %s", k.InboxAddress, k.AccountID)
	}
	if k.Replace {
		if err := tx.RevokeMailboxKeys(inboxID); err != nil {
			return err
		}
	}
	return tx.InsertKey(k, inboxID)
}

// checkKeyLimit refuses one more account key past MaxActiveKeys.
func checkKeyLimit(tx Tx, accountID string) error {
	active, err := tx.ActiveAccountKeys(accountID)
	if err == nil && active >= MaxActiveKeys {
		err = Errorf(ECodeKeyLimit, "account %s already has %d active keys", accountID, MaxActiveKeys)
	}
	return err
}

// UnknownKey answers a token that is no key: missing, malformed and unknown alike, so
// that the answer tells nothing of which.
func UnknownKey() error { return Errorf(ECodeUnauthorized, "missing or invalid API key") }

// CheckTokenShape refuses a token that cannot be a key, before a store looks it up.
func CheckTokenShape(token string) error {
	if !strings.HasPrefix(token, AccountKeyPrefix) && !strings.HasPrefix(token, MailboxKeyPrefix) {
		return UnknownKey()
	}
	return nil
}

// StoredKey is what a store holds of a key: whom it names, and what decides whether it
// may act now.
type StoredKey struct {
	Principal Principal
	ExpiresAt *time.Time
	Revoked   bool
	Disabled  bool // its account is
}

// Resolve decides what a key may do at now (Keys.Authenticate).
//
// Errors: unauthorized (expired or revoked), access_denied (the account is disabled).
func (k StoredKey) Resolve(now time.Time) (*Principal, error) {
	if k.Revoked || (k.ExpiresAt != nil && !now.Before(*k.ExpiresAt)) {
		return nil, Errorf(ECodeUnauthorized, "API key expired or revoked")
	}
	if k.Disabled {
		return nil, Errorf(ECodeAccessDenied, "account is disabled")
	}
	p := k.Principal
	return &p, nil
}
