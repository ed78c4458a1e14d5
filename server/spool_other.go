//go:build !unix

package server

import (
	"io"
	"os"
)

// mapFile reads the first size bytes of f: without mmap the message is read onto the heap,
// still bounded by the Budget the listener takes for it first.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	_, err := f.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b, err
}

func unmapFile([]byte) error { return nil }
