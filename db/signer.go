package db

import (
	"crypto/hmac"
	"crypto/sha256"
)

// Signer is how inboxd signs what it hands out and must later trust without storing it
// (page tokens, attachment download links): an HMAC-SHA256 under one server secret over
// the given parts in order, cut to a fixed size. A client that alters a signed value
// cannot produce its MAC, and a MAC of the wrong size never verifies.
type Signer struct {
	key  []byte
	size int
}

// NewSigner returns a Signer keyed with key whose MACs are size bytes (at most
// sha256.Size; a larger size gives the whole MAC).
func NewSigner(key []byte, size int) Signer {
	return Signer{key: key, size: min(size, sha256.Size)}
}

// Sign returns the MAC of parts, written one after the other.
func (s Signer) Sign(parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		mac.Write(p)
	}
	return mac.Sum(nil)[:s.size]
}

// Verify reports whether mac is the MAC of parts, in constant time.
func (s Signer) Verify(mac []byte, parts ...[]byte) bool {
	return hmac.Equal(mac, s.Sign(parts...))
}
