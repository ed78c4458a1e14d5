package db

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// ListScope is what a page token is bound to: a short hash of the parts that name a list
// (the kind of list, the inbox or account, the filters), so a token of one list is refused
// by another.
func ListScope(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}
