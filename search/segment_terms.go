package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/blevesearch/vellum"
	zap "github.com/blevesearch/zapx/v17"
)

// A search reads a segment file's term dictionaries and postings with pread, not through
// zapx's mapping of the file. Whatever a process reads through a mapping stays in its
// resident memory until released (segment_release.go), and on a read fault the kernel
// maps the cached pages of the 64 KB around the page too: one search for one word mapped
// ~7 MB of a 19-segment index, and a search loop kept 100-250 MB mapped however often the
// pages were released (BENCHMARKS.md, tenth session). Read with pread, a postings list
// costs a copy from the page cache into a buffer the collector reclaims.
//
// The dictionaries are vellum FSTs, which are searched in memory: each one a search uses is
// read into memory once per segment (the fields a search looks in take ~36 bytes a
// message). Positions (phrases), stored pair filters and the walk of the day dictionary
// for a date range still go through the mapping: they are rarer, and what they map is
// released.

// segTerms reads one segment file's dictionaries and postings.
type segTerms struct {
	zs *zap.Segment
	// Closed by the os package's cleanup once unreachable: the cache drops a segment at the
	// first search after it left the index, and a search still using it keeps it open.
	f *os.File

	mu   sync.Mutex
	fsts map[string]*vellum.FST // by field; nil for a field without a dictionary
}

// openSegTerms returns the reader of seg's file, or nil for a segment that is not a file
// (one built in memory has nothing mapped to spare).
func openSegTerms(seg segment.Segment) (*segTerms, error) {
	zs, ok := seg.(*zap.Segment)
	if !ok {
		return nil, nil
	}
	f, err := os.Open(zs.Path())
	if err != nil {
		return nil, err
	}
	return &segTerms{zs: zs, f: f, fsts: map[string]*vellum.FST{}}, nil
}

var errBadPostings = errors.New("search: malformed postings list")

// postings returns the documents holding term in field, deleted ones included.
func (t *segTerms) postings(field, term string) (*roaring.Bitmap, error) {
	fst, err := t.dictionary(field)
	if err != nil || fst == nil {
		return emptyBitmap, err
	}
	val, ok, err := fst.Get([]byte(term))
	if err != nil || !ok {
		return emptyBitmap, err
	}
	if val&zap.FSTValEncodingMask == zap.FSTValEncoding1Hit {
		doc, _ := zap.FSTValDecode1Hit(val)
		return roaring.BitmapOf(uint32(doc)), nil
	}
	// The postings list: the offsets of its frequencies and of its locations, then the
	// length of its bitmap and the bitmap. Most bitmaps of a search are small: one read
	// takes the header with the first postingsRead bytes.
	buf := make([]byte, postingsRead)
	n, err := t.f.ReadAt(buf, int64(val))
	if n == 0 {
		return nil, fmt.Errorf("search: %s: postings at %d: %w", t.zs.Path(), val, err)
	}
	buf = buf[:n]
	var size uint64
	rest := buf
	for range 3 {
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			return nil, errBadPostings
		}
		size, rest = v, rest[k:]
	}
	if size > uint64(len(t.zs.Data())) {
		return nil, errBadPostings
	}
	if uint64(len(rest)) < size {
		start := int64(val) + int64(n-len(rest))
		rest = make([]byte, size)
		if _, err := t.f.ReadAt(rest, start); err != nil {
			return nil, fmt.Errorf("search: %s: postings at %d: %w", t.zs.Path(), val, err)
		}
	}
	bm := roaring.New()
	if _, err := bm.FromBuffer(rest[:size]); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadPostings, err)
	}
	return bm, nil
}

// postingsRead is what one read of a postings list takes: the header (up to 30 bytes)
// and a bitmap of up to ~500 documents.
const postingsRead = 1024

// dictionary returns field's dictionary, read on first use.
func (t *segTerms) dictionary(field string) (*vellum.FST, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if fst, ok := t.fsts[field]; ok {
		return fst, nil
	}
	fst, err := t.readDictionary(field)
	if err != nil {
		return nil, err
	}
	t.fsts[field] = fst
	return fst, nil
}

func (t *segTerms) readDictionary(field string) (*vellum.FST, error) {
	addr, err := t.zs.DictAddr(field)
	if err != nil {
		return nil, nil // no such field, or one without a dictionary: no terms
	}
	var hdr [binary.MaxVarintLen64]byte
	n, err := t.f.ReadAt(hdr[:], int64(addr))
	if n == 0 {
		return nil, fmt.Errorf("search: %s: dictionary of %s: %w", t.zs.Path(), field, err)
	}
	size, k := binary.Uvarint(hdr[:n])
	if k <= 0 || size == 0 || size > uint64(len(t.zs.Data())) {
		return nil, fmt.Errorf("search: %s: malformed dictionary of %s", t.zs.Path(), field)
	}
	b := make([]byte, size)
	if _, err := t.f.ReadAt(b, int64(addr)+int64(k)); err != nil {
		return nil, fmt.Errorf("search: %s: dictionary of %s: %w", t.zs.Path(), field, err)
	}
	return vellum.Load(b)
}
