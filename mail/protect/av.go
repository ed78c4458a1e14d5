package protect

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// EICAR is the antivirus test file: harmless, and detected by every scanner as if it were
// a virus. It is how you try the malware path on purpose.
const EICAR = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`

// EICARSignature is the name the built-in scanner reports for it (ClamAV's classic name).
const EICARSignature = "Eicar-Test-Signature"

// Limits of the built-in archive scan. A zip bomb expands a few kilobytes into gigabytes:
// the scan stops at these limits and reports the attachment unscannable, so a message
// that cannot be looked at whole is held for review rather than passed.
const (
	maxArchiveDepth   = 3        // zips inside zips
	maxArchiveEntries = 1000     // entries over all archives of one message
	maxExpandedBytes  = 64 << 20 // bytes decompressed over all archives of one message
	maxNestedArchive  = 16 << 20 // a nested zip is read into memory up to this size
)

// avResult is the built-in scanner's finding on one message.
type avResult struct {
	signatures  []string
	unscannable []string // why, per attachment
}

func (r *avResult) infected(sig string) {
	for _, s := range r.signatures {
		if s == sig {
			return
		}
	}
	r.signatures = append(r.signatures, sig)
}

// scanBuiltin looks for EICAR in the bodies and every attachment, opening zip archives.
func scanBuiltin(in *Input) *avResult {
	r := &avResult{}
	if bytes.Contains([]byte(in.Text), []byte(EICAR)) || bytes.Contains([]byte(in.HTML), []byte(EICAR)) {
		r.infected(EICARSignature)
	}
	// One budget for the whole message: a hundred small bombs cost what one does.
	b := &budget{bytes: maxExpandedBytes, entries: maxArchiveEntries}
	for _, a := range in.Attachments {
		if err := scanFile(a.Content, 0, b, r); err != nil {
			r.unscannable = append(r.unscannable, clip(fmt.Sprintf("%s: %v", a.Filename, err), 300))
		}
	}
	return r
}

type budget struct {
	bytes   int64
	entries int
}

var (
	errEncrypted = errors.New("encrypted archive entry")
	errTooBig    = errors.New("archive expands beyond the scan limit")
	errTooMany   = errors.New("archive has too many entries")
	errTooDeep   = errors.New("archives nested too deep")
)

func isZip(b []byte) bool {
	return bytes.HasPrefix(b, []byte("PK\x03\x04")) || bytes.HasPrefix(b, []byte("PK\x05\x06"))
}

// scanFile scans one file's bytes, and the entries of a zip archive. It returns why the
// file could not be scanned whole, if so.
func scanFile(content []byte, depth int, b *budget, r *avResult) error {
	if bytes.Contains(content, []byte(EICAR)) {
		r.infected(EICARSignature)
	}
	if !isZip(content) {
		return nil
	}
	if depth >= maxArchiveDepth {
		return errTooDeep
	}
	zr, err := zip.NewReader(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		// Not an archive after all (or a broken one): its bytes were scanned as they are.
		return nil
	}
	var incomplete error
	for _, f := range zr.File {
		b.entries--
		if b.entries < 0 {
			return errTooMany
		}
		if f.Flags&0x1 != 0 {
			incomplete = fmt.Errorf("%w %q", errEncrypted, clip(f.Name, 200))
			continue
		}
		if f.FileInfo().IsDir() {
			continue
		}
		if err := scanEntry(f, depth, b, r); err != nil {
			if errors.Is(err, errTooBig) || errors.Is(err, errTooMany) {
				return err
			}
			incomplete = err
		}
	}
	return incomplete
}

// scanEntry streams one archive entry through the EICAR search, never holding more than a
// nested archive in memory, and counting every decompressed byte against the budget.
func scanEntry(f *zip.File, depth int, b *budget, r *avResult) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("entry %q cannot be read: %v", clip(f.Name, 200), err)
	}
	defer rc.Close()
	lr := &limited{r: rc, left: b.bytes}
	head := make([]byte, 4)
	n, _ := io.ReadFull(lr, head)
	head = head[:n]
	if isZip(head) {
		buf := bytes.NewBuffer(append([]byte(nil), head...))
		if _, err := io.Copy(buf, io.LimitReader(lr, maxNestedArchive)); err != nil {
			b.bytes = lr.left
			return entryErr(f, err)
		}
		b.bytes = lr.left
		if buf.Len() >= maxNestedArchive {
			return errTooBig
		}
		return scanFile(buf.Bytes(), depth+1, b, r)
	}
	found, err := containsStream(io.MultiReader(bytes.NewReader(head), lr), []byte(EICAR))
	b.bytes = lr.left
	if found {
		r.infected(EICARSignature)
	}
	if err != nil {
		return entryErr(f, err)
	}
	return nil
}

func entryErr(f *zip.File, err error) error {
	if errors.Is(err, errTooBig) {
		return err
	}
	return fmt.Errorf("entry %q cannot be read: %v", clip(f.Name, 200), err)
}

// limited is an io.Reader that fails with errTooBig past its budget.
type limited struct {
	r    io.Reader
	left int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One more byte tells a file of exactly the budget from a larger one.
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			return 0, errTooBig
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// containsStream reports whether needle occurs in r, reading it in chunks.
func containsStream(r io.Reader, needle []byte) (bool, error) {
	buf := make([]byte, 0, 64<<10+len(needle))
	chunk := make([]byte, 64<<10)
	found := false
	for {
		n, err := r.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if !found && bytes.Contains(buf, needle) {
			found = true
		}
		if keep := len(needle) - 1; len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err == io.EOF {
			return found, nil
		}
		if err != nil {
			return found, err
		}
	}
}
