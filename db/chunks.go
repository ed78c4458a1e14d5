package db

import (
	"errors"
	"io"
)

// ChunkedBody is an AttachmentBody whose bytes a store reads a chunk at a time (load), so
// a download holds one chunk in memory, not the whole attachment, and nothing of the store
// between reads. Seeking (HTTP Range requests) costs nothing until the next Read.
type ChunkedBody struct {
	size int64
	load func(off int64) (chunk []byte, base int64, err error)

	off   int64  // the next byte Read returns
	chunk []byte // the chunk holding bytes [base, base+len(chunk)) when loaded
	base  int64
}

// NewChunkedBody returns the body of size bytes that load reads: the chunk that holds
// byte off, and the offset of its first byte. load returns not_found when the bytes are
// gone (the message was deleted while it was read).
func NewChunkedBody(size int64, load func(off int64) (chunk []byte, base int64, err error)) *ChunkedBody {
	return &ChunkedBody{size: size, load: load}
}

// Size is the body's length in bytes.
func (b *ChunkedBody) Size() int64 { return b.size }

// Read implements io.Reader.
func (b *ChunkedBody) Read(p []byte) (int, error) {
	if b.off >= b.size {
		return 0, io.EOF
	}
	if b.chunk == nil || b.off < b.base || b.off >= b.base+int64(len(b.chunk)) {
		chunk, base, err := b.load(b.off)
		if err != nil {
			return 0, err
		}
		if b.off < base || b.off >= base+int64(len(chunk)) {
			return 0, errors.New("db: a chunk of an attachment is shorter than the attachment's size")
		}
		b.chunk, b.base = chunk, base
	}
	n := copy(p, b.chunk[b.off-b.base:])
	b.off += int64(n)
	return n, nil
}

// Seek implements io.Seeker.
func (b *ChunkedBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += b.off
	case io.SeekEnd:
		offset += b.size
	}
	if offset < 0 {
		return 0, errors.New("db: seek before the start of an attachment")
	}
	b.off = offset
	return offset, nil
}
