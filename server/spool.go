package server

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// spoolMemory is how much of a message a spool keeps in memory before it moves it to a
// file: nearly all mail is smaller, and is received, parsed and stored without touching
// the file system at all.
const spoolMemory = 64 << 10

// spool holds one message while it arrives: in memory up to spoolMemory bytes, then in a
// file of the spool directory, so that the messages of two hundred senders in DATA at
// once cost the server disk, not memory. The file is unlinked as soon as it is created:
// it disappears with the spool or with the process, whatever happens, and nothing is left
// behind for a restart to clean up.
type spool struct {
	dir  string
	mem  []byte
	file *os.File
	size int64
	// linked: the file could not be removed while open (Windows); Close removes it.
	linked bool

	mapped []byte // the file's bytes in memory once Bytes was called (unmapped by Close)
}

func newSpool(dir string) *spool { return &spool{dir: dir, mem: make([]byte, 0, 4<<10)} }

// errSpoolWrite wraps a failure to store what arrived (a full disk): the sender is told to
// try again later, not that its message was bad.
type errSpoolWrite struct{ err error }

func (e errSpoolWrite) Error() string { return e.err.Error() }
func (e errSpoolWrite) Unwrap() error { return e.err }

// spoolBuffers are the buffers a message on its way to a spool file is read through.
var spoolBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// ReadFrom reads r to its end into the spool. A failure to store is an errSpoolWrite;
// r's own errors are returned as they are.
func (s *spool) ReadFrom(r io.Reader) (int64, error) {
	start := s.size
	for s.file == nil {
		// Straight into memory while the message is small: no copy through a buffer.
		if len(s.mem) == cap(s.mem) {
			s.mem = slices.Grow(s.mem, min(cap(s.mem), spoolMemory))
		}
		n, err := r.Read(s.mem[len(s.mem):cap(s.mem)])
		s.mem = s.mem[:len(s.mem)+n]
		s.size += int64(n)
		if len(s.mem) > spoolMemory {
			if err := s.spill(); err != nil {
				return s.size - start, errSpoolWrite{err}
			}
		}
		if err != nil {
			return s.size - start, eofIsEnd(err)
		}
	}
	buf := spoolBuffers.Get().(*[32 << 10]byte)
	defer spoolBuffers.Put(buf)
	for {
		n, rerr := r.Read(buf[:])
		if _, err := s.Write(buf[:n]); err != nil {
			return s.size - start, errSpoolWrite{err}
		}
		if rerr != nil {
			return s.size - start, eofIsEnd(rerr)
		}
	}
}

func eofIsEnd(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// Write appends p to the message.
func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil && len(s.mem)+len(p) <= spoolMemory {
		s.mem = append(s.mem, p...)
		s.size += int64(len(p))
		return len(p), nil
	}
	if s.file == nil {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	n, err := s.file.Write(p)
	s.size += int64(n)
	return n, err
}

// spill moves what is in memory to a new, already unlinked file.
func (s *spool) spill() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	f, err := os.CreateTemp(s.dir, "data-*")
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.file, s.linked = f, os.Remove(f.Name()) != nil
	if _, err := f.Write(s.mem); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.mem = nil
	return nil
}

// Size is the number of bytes written.
func (s *spool) Size() int64 { return s.size }

// Bytes returns the message. A spooled file is mapped into memory, not read onto the
// heap: its pages belong to the page cache, which can drop them, and Close unmaps them.
// The bytes are valid until Close.
func (s *spool) Bytes() ([]byte, error) {
	if s.file == nil {
		return s.mem, nil
	}
	if s.mapped == nil && s.size > 0 {
		b, err := mapFile(s.file, s.size)
		if err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
		s.mapped = b
	}
	return s.mapped, nil
}

// Close releases the message: its memory, its mapping and its file.
func (s *spool) Close() error {
	s.mem = nil
	if s.file == nil {
		return nil
	}
	var err error
	if s.mapped != nil {
		err = unmapFile(s.mapped)
		s.mapped = nil
	}
	err = errors.Join(err, s.file.Close())
	if s.linked {
		err = errors.Join(err, os.Remove(s.file.Name()))
	}
	s.file = nil
	return err
}

// cleanSpool removes what a spool directory holds: files from a process that ended before
// it could unlink them (only where open files cannot be removed).
func cleanSpool(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "data-*"))
	for _, n := range names {
		os.Remove(n)
	}
}
