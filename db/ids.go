package db

import (
	"crypto/rand"
	"fmt"
)

// newUUID returns a random (version 4) UUID in its canonical text form, for new inbox ids
// and the middle of account keys. Written here rather than taken from google/uuid, which
// the stores still use: that package implements database/sql's Scanner and Valuer, and
// importing it would pull database/sql/driver into the model, which must depend on no
// database package (DESIGN.md, "The house"). Sixteen random bytes with the version and
// variant bits set are all RFC 9562 asks of version 4.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand: it crashes the program instead)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
