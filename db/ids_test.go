package db

import (
	"testing"

	"github.com/google/uuid"
)

// New inbox ids and account keys carry UUIDs that any UUID parser accepts as version 4,
// and no two are alike.
func TestNewUUIDIsARandomVersion4UUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := newUUID()
		u, err := uuid.Parse(s)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != s {
			t.Fatalf("newUUID() = %q: parse %v, version %v, variant %v", s, err, u.Version(), u.Variant())
		}
		if seen[s] {
			t.Fatalf("newUUID() repeated %q", s)
		}
		seen[s] = true
	}
}
