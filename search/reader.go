package search

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
)

// readerID returns the id by which the index at path follows the store's change log
// (Source.Trim), made on first use. It is kept in a file beside the index directory, not
// in it: a rebuild replaces the directory, and the index stays the same reader.
func readerID(path string) (string, error) {
	file := path + ".reader"
	b, err := os.ReadFile(file)
	if id := string(bytes.TrimSpace(b)); err == nil && id != "" {
		return id, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	id := hex.EncodeToString(raw)
	// Written whole, then renamed: a crash leaves the old state or the new, never half.
	if err := os.WriteFile(file+".tmp", []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, os.Rename(file+".tmp", file)
}
