package search

import (
	"encoding/binary"
	"math/bits"
	"reflect"
	"unsafe"

	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/blevesearch/vellum"
	zap "github.com/blevesearch/zapx/v17"
)

// Reading the zap v17 segments a merge takes. zapx does not export a segment's bytes or
// the offsets of its stored values and fields, so they are read from its SegmentBase by
// field name (sbLayout); if this zapx has no such fields the merge is left to zapx.

// mergeInput is one segment of a merge, as the merger reads it.
type mergeInput struct {
	mem         []byte
	numDocs     uint64
	storedIndex uint64
	fields      []string // by field id
	opts        []index.FieldIndexingOptions
	dicts       []uint64 // offset of each field's dictionary
	newIDs      []uint16 // each field's id in the merged segment
	newNums     []uint64 // each document's number in the merged segment, or mergeDropped
	dropped     bool     // some of its documents are dropped
	mapped      bool     // mem is a file's mapping (not the Go heap: no advice for it)
}

const mergeDropped = ^uint64(0) // zapx's number of a dropped document

// sbLayout is where SegmentBase keeps what the merger reads (ok if all were found).
var sbLayout = func() (l struct {
	mem, storedIndex, sectionsIndex, chunkMode uintptr
	ok                                         bool
}) {
	t := reflect.TypeOf(zap.SegmentBase{})
	find := func(name string, kind reflect.Type) (uintptr, bool) {
		f, ok := t.FieldByName(name)
		return f.Offset, ok && f.Type == kind
	}
	var ok [4]bool
	l.mem, ok[0] = find("mem", reflect.TypeOf([]byte(nil)))
	l.storedIndex, ok[1] = find("storedIndexOffset", reflect.TypeOf(uint64(0)))
	l.sectionsIndex, ok[2] = find("sectionsIndexOffset", reflect.TypeOf(uint64(0)))
	l.chunkMode, ok[3] = find("chunkMode", reflect.TypeOf(uint32(0)))
	l.ok = ok == [4]bool{true, true, true, true}
	return l
}()

// readMergeInput reads segment s, or returns errSegmentUnsupported if it holds anything
// the merger does not handle: another kind of segment, file callbacks, updated fields,
// another chunk mode, nested documents, doc values or any section but the inverted index.
func readMergeInput(s segment.Segment) (*mergeInput, error) {
	var sb *zap.SegmentBase
	switch s := s.(type) {
	case *zap.Segment:
		sb = &s.SegmentBase
	case *zap.SegmentBase:
		sb = s
	default:
		return nil, errSegmentUnsupported
	}
	if !sbLayout.ok || sb.CallbackId() != "" || len(sb.GetUpdatedFields()) > 0 {
		return nil, errSegmentUnsupported
	}
	p := unsafe.Pointer(sb)
	in := &mergeInput{
		mem:         *(*[]byte)(unsafe.Add(p, sbLayout.mem)),
		numDocs:     sb.Count(),
		storedIndex: *(*uint64)(unsafe.Add(p, sbLayout.storedIndex)),
	}
	if *(*uint32)(unsafe.Add(p, sbLayout.chunkMode)) != chunkMode {
		return nil, errSegmentUnsupported
	}
	r := memReader{mem: in.mem, pos: in.storedIndex + 8*in.numDocs, ok: true}
	if r.uvarint() != 0 { // child -> parent edges of nested documents
		return nil, errSegmentUnsupported
	}
	r.pos = *(*uint64)(unsafe.Add(p, sbLayout.sectionsIndex))
	n := r.uvarint()
	for i := uint64(0); i < n && r.ok; i++ {
		f := memReader{mem: in.mem, pos: binary.BigEndian.Uint64(r.bytes(8)), ok: true}
		name := string(f.bytes(f.uvarint()))
		opts := index.FieldIndexingOptions(f.uvarint())
		var dict uint64
		for nsec := f.uvarint(); nsec > 0 && f.ok; nsec-- {
			sec := binary.BigEndian.Uint16(f.bytes(2))
			addr := binary.BigEndian.Uint64(f.bytes(8))
			switch {
			case sec == zap.SectionInvertedTextIndex:
				d := memReader{mem: in.mem, pos: addr, ok: true}
				if d.uvarint() != noDocValues || d.uvarint() != noDocValues {
					return nil, errSegmentUnsupported
				}
				dict = d.uvarint()
				f.ok = f.ok && d.ok
			case addr != 0:
				return nil, errSegmentUnsupported
			}
		}
		if !f.ok || dict == 0 || opts.IncludeDocValues() || (i == 0) != (name == "_id") {
			return nil, errSegmentUnsupported
		}
		in.fields = append(in.fields, name)
		in.opts = append(in.opts, opts)
		in.dicts = append(in.dicts, dict)
	}
	if !r.ok || len(in.fields) == 0 {
		return nil, errSegmentUnsupported
	}
	return in, nil
}

// dictionary returns the term dictionary of field fid.
func (in *mergeInput) dictionary(fid int) (*vellum.FST, error) {
	b, err := in.dictionaryBytes(fid)
	if err != nil {
		return nil, err
	}
	return vellum.Load(b)
}

// dictionaryBytes returns the bytes of field fid's term dictionary (a vellum FST).
func (in *mergeInput) dictionaryBytes(fid int) ([]byte, error) {
	r := memReader{mem: in.mem, pos: in.dicts[fid], ok: true}
	b := r.bytes(r.uvarint())
	if !r.ok {
		return nil, errMergeCorrupt
	}
	return b, nil
}

// memReader reads varints and bytes of a segment; ok turns false past its end.
type memReader struct {
	mem []byte
	pos uint64
	ok  bool
}

func (r *memReader) uvarint() uint64 {
	if r.pos >= uint64(len(r.mem)) {
		r.ok = false
		return 0
	}
	v, n := binary.Uvarint(r.mem[r.pos:])
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.pos += uint64(n)
	return v
}

func (r *memReader) bytes(n uint64) []byte {
	if r.pos+n > uint64(len(r.mem)) || r.pos+n < r.pos {
		r.ok = false
		return make([]byte, min(n, 8))
	}
	b := r.mem[r.pos : r.pos+n]
	r.pos += n
	return b
}

// appendRoaringDocs appends the numbers of a serialized roaring bitmap (any container
// kind) to docs.
func appendRoaringDocs(docs []uint32, b []byte) ([]uint32, bool) {
	if len(b) < 8 {
		return docs, false
	}
	cookie := binary.LittleEndian.Uint32(b)
	var nc, pos int
	var runFlags []byte
	switch {
	case cookie == 12346:
		nc = int(binary.LittleEndian.Uint32(b[4:]))
		pos = 8
	case cookie&0xffff == 12347:
		nc = int(cookie>>16) + 1
		pos = 4 + (nc+7)/8
		if pos > len(b) {
			return docs, false
		}
		runFlags = b[4:pos]
	default:
		return docs, false
	}
	keys := pos
	pos += 4 * nc
	if runFlags == nil || nc >= 4 {
		pos += 4 * nc // offsets: the containers follow each other anyway
	}
	if pos > len(b) {
		return docs, false
	}
	for c := 0; c < nc; c++ {
		high := uint32(binary.LittleEndian.Uint16(b[keys+4*c:])) << 16
		card := int(binary.LittleEndian.Uint16(b[keys+4*c+2:])) + 1
		switch {
		case runFlags != nil && runFlags[c/8]&(1<<(c%8)) != 0:
			if pos+2 > len(b) {
				return docs, false
			}
			nr := int(binary.LittleEndian.Uint16(b[pos:]))
			pos += 2
			if pos+4*nr > len(b) {
				return docs, false
			}
			for ; nr > 0; nr-- {
				start := uint32(binary.LittleEndian.Uint16(b[pos:]))
				length := uint32(binary.LittleEndian.Uint16(b[pos+2:]))
				for v := start; v <= start+length; v++ {
					docs = append(docs, high|v)
				}
				pos += 4
			}
		case card <= 4096:
			if pos+2*card > len(b) {
				return docs, false
			}
			for i := 0; i < card; i++ {
				docs = append(docs, high|uint32(binary.LittleEndian.Uint16(b[pos+2*i:])))
			}
			pos += 2 * card
		default:
			if pos+8192 > len(b) {
				return docs, false
			}
			for w := 0; w < 1024; w++ {
				word := binary.LittleEndian.Uint64(b[pos+8*w:])
				for word != 0 {
					docs = append(docs, high|uint32(w<<6+bits.TrailingZeros64(word)))
					word &= word - 1
				}
			}
			pos += 8192
		}
	}
	return docs, true
}
