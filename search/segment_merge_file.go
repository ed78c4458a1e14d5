package search

import (
	"encoding/binary"
	"errors"

	"github.com/RoaringBitmap/roaring/v2"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/blevesearch/vellum"
	zap "github.com/blevesearch/zapx/v17"
)

// Most of a merge is the postings of the body and keyword fields: a bitmap of documents
// each. Through the public interfaces every term costs a second walk down its segment's
// dictionary (PostingsList looks the term up again, although the iterator stood on it)
// and a postings list object, about as much as the merge's own work. A persisted segment
// offers its file and where each field's dictionary starts in it (zapx's public
// Segment.Data and DictAddr), and the dictionary's value for a term is where its postings
// are (zapx's zap.md): fileDict walks that dictionary itself and reads the bitmap there.
// Segments still in memory, other fields and a "1-hit" term (a value that is the posting
// itself) go through the interfaces; TestMergeSameAsZapx checks both ways against zapx's
// own merge, byte for byte.

// fileSegment is what a persisted zapx segment offers of its file.
type fileSegment interface {
	Data() []byte
	DictAddr(field string) (uint64, error)
	Version() uint32
	ChunkMode() uint32
}

var errBadPostings = errors.New("search: merge: a postings record outside its segment")

// fileDict walks one field's dictionary in a persisted segment's bytes.
type fileDict struct {
	data    []byte
	it      *vellum.FSTIterator // nil past the last term
	started bool                // the iterator starts on the first term
}

// openFileDict returns the dictionary of field in s read from its file, or nil if s
// is not a persisted segment of the layout this package writes.
func openFileDict(s segment.Segment, field string) (*fileDict, error) {
	f, ok := s.(fileSegment)
	if !ok || f.Version() != zap.Version || f.ChunkMode() != chunkMode {
		return nil, nil
	}
	addr, err := f.DictAddr(field)
	if err != nil {
		return nil, nil // no dictionary: the public path says so in its own way
	}
	data := f.Data()
	fst, err := vellum.Load(lengthPrefixed(data, addr))
	if err != nil {
		return nil, err
	}
	it, err := fst.Iterator(nil, nil)
	if errors.Is(err, vellum.ErrIteratorDone) {
		return &fileDict{data: data}, nil
	}
	if err != nil {
		return nil, err
	}
	return &fileDict{data: data, it: it}, nil
}

// lengthPrefixed returns the bytes at off that a uvarint length precedes (nil if they
// do not fit in data).
func lengthPrefixed(data []byte, off uint64) []byte {
	if off >= uint64(len(data)) {
		return nil
	}
	n, k := binary.Uvarint(data[off:])
	start := off + uint64(k)
	if k <= 0 || n > uint64(len(data))-start {
		return nil
	}
	return data[start : start+n]
}

// next moves to the next term; it returns false past the last.
func (d *fileDict) next() (bool, error) {
	if d.it == nil {
		return false, nil
	}
	if !d.started {
		d.started = true
		return true, nil
	}
	err := d.it.Next()
	if errors.Is(err, vellum.ErrIteratorDone) {
		d.it = nil
		return false, nil
	}
	return err == nil, err
}

// current returns the term the dictionary stands on and its value.
func (d *fileDict) current() ([]byte, uint64) { return d.it.Current() }

// bitmap reads into bm the documents of the postings record at off: after the offsets
// of its frequencies and locations, the length and bytes of its roaring bitmap. bm
// shares the segment's bytes.
func (d *fileDict) bitmap(off uint64, bm *roaring.Bitmap) error {
	if off >= uint64(len(d.data)) {
		return errBadPostings
	}
	p := d.data[off:]
	for range 2 {
		_, k := binary.Uvarint(p)
		if k <= 0 {
			return errBadPostings
		}
		p = p[k:]
	}
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return errBadPostings
	}
	_, err := bm.FromBuffer(p[k : k+int(n)])
	return err
}

// isOneHit reports whether a dictionary value is a "1-hit": the posting itself.
func isOneHit(v uint64) bool { return v&zap.FSTValEncodingMask == zap.FSTValEncoding1Hit }
