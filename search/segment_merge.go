package search

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
)

// Segments are merged here rather than by zapx, into the file zapx's merge writes for the
// same segments and deleted documents (segment_merge_test.go checks them byte for byte).
// zapx decodes every posting through its postings iterator, adds each document to a
// roaring bitmap one by one and re-encodes the frequencies through its chunk coders; here
// each term's postings are read straight from the segments' bytes: the documents from
// the serialized bitmaps, renumbered (an offset where a segment has no deletions), and
// the frequency and location bytes copied as they are, then written with the builder's
// code (segment_write.go). Stored values are copied document by document.
//
// Only segments as this package makes them are handled (readMergeInput): anything else,
// and fields whose options differ between segments, are merged by zapx itself.

// segmentsMerged counts the merges mergeSegments made (tests check the plugin is used).
var segmentsMerged atomic.Uint64

// mergeFlushSize is how much of the merged segment is kept before it is written out.
const mergeFlushSize = 1 << 20

// mergeReleaseSize is how much of the merged segment is written between two releases of
// the pages the merge mapped reading its sources. A merge reads them nearly whole within
// a second or two, faster than the index's releaseEvery: under a stream of mail the
// merges took the server's file-backed memory from ~35 to up to ~75 MB (BENCHMARKS.md,
// eleventh session). Reading on after a release maps a page again from the page cache.
var mergeReleaseSize uint64 = 2 << 20 // a variable for tests

// merger holds the state of one merge.
type merger struct {
	*segBuilder
	ins        []*mergeInput
	numDocs    uint64
	fieldsSame bool // every segment has the merged segment's fields: no ids to rewrite

	f          *os.File
	crc        uint32
	releasedAt uint64 // the segment's size when the sources' pages were last released
	rep        segment.StatsReporter
	stop       chan struct{}

	docs  []uint32 // one segment's documents of the current term
	refs  []segRef // the term's postings in the merged segment
	tfEnd []uint32 // end of each posting's frequency bytes in tf
	lcEnd []uint32 // end of each posting's location bytes in locs
	tf    []byte
	locs  []byte
	meta  []byte
}

// mergeSegments merges segs without the documents in drops into a new segment file at
// path, as zapx's Merge does, and returns each segment's new document numbers and the
// file's size; errSegmentUnsupported (before anything is written) if zapx must merge them.
func mergeSegments(segs []segment.Segment, drops []*roaring.Bitmap, path string,
	closeCh chan struct{}, rep segment.StatsReporter) ([][]uint64, uint64, error) {
	if segSections == nil || index.WriterHook != nil || zap.DefaultChunkMode != chunkMode || len(segs) == 0 {
		return nil, 0, errSegmentUnsupported
	}
	m := &merger{rep: rep, stop: closeCh, fieldsSame: true}
	for _, s := range segs {
		in, err := readMergeInput(s)
		if err != nil {
			return nil, 0, err
		}
		if _, file := s.(*zap.Segment); file {
			in.mapped = true
			adviseWillNeed(in.mem) // a merge reads its sources nearly whole
		}
		m.ins = append(m.ins, in)
	}
	names, opts, err := m.mergeFields()
	if err != nil {
		return nil, 0, err
	}
	newNums := m.renumber(drops)
	if m.numDocs == 0 {
		return nil, 0, errSegmentUnsupported // zapx writes no sections then
	}
	if isClosed(closeCh) {
		return nil, 0, segment.ErrClosed
	}

	m.segBuilder = newBuilder()
	m.out = make([]byte, 0, 2*mergeFlushSize)
	for id, name := range names {
		m.fields = append(m.fields, segField{name: name, opts: opts[id]})
	}

	if m.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0600); err != nil {
		return nil, 0, err
	}
	size, err := m.write()
	if err == nil {
		err = m.f.Sync()
	}
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, 0, err
	}
	segmentsMerged.Add(1)
	return newNums, size, nil
}

// mergeFields returns the fields of the merged segment (_id, then the others by name)
// and their options, and each segment's field ids in it.
func (m *merger) mergeFields() ([]string, []index.FieldIndexingOptions, error) {
	optsOf := map[string]index.FieldIndexingOptions{}
	for _, in := range m.ins {
		if !slices.Equal(in.fields, m.ins[0].fields) {
			m.fieldsSame = false
		}
		for id, name := range in.fields {
			if o, ok := optsOf[name]; ok && o != in.opts[id] {
				return nil, nil, errSegmentUnsupported // zapx keeps the options all share
			}
			optsOf[name] = in.opts[id]
		}
	}
	names := fieldOrder(optsOf)
	opts := make([]index.FieldIndexingOptions, len(names))
	ids := make(map[string]uint16, len(names))
	for id, name := range names {
		opts[id], ids[name] = optsOf[name], uint16(id)
	}
	for _, in := range m.ins {
		for _, name := range in.fields {
			in.newIDs = append(in.newIDs, ids[name])
		}
	}
	return names, opts, nil
}

// renumber numbers the documents that are kept, in the order of the segments.
func (m *merger) renumber(drops []*roaring.Bitmap) [][]uint64 {
	out := make([][]uint64, len(m.ins))
	for i, in := range m.ins {
		var dropped *roaring.Bitmap
		if i < len(drops) && drops[i] != nil && !drops[i].IsEmpty() {
			dropped = drops[i]
			in.dropped = true
		}
		nums := make([]uint64, in.numDocs)
		for d := range nums {
			if dropped != nil && dropped.Contains(uint32(d)) {
				nums[d] = mergeDropped
				continue
			}
			nums[d] = m.numDocs
			m.numDocs++
		}
		in.newNums, out[i] = nums, nums
	}
	return out
}

// write writes the merged segment and returns its size.
func (m *merger) write() (uint64, error) {
	storedIndex, err := m.writeStored()
	if err != nil {
		return 0, err
	}
	addrs := make([]uint64, len(m.fields))
	for id := range m.fields {
		if addrs[id], err = m.mergeField(uint16(id)); err != nil {
			return 0, err
		}
	}
	sectionsIndex := m.writeSectionsIndex(addrs)
	if err := m.flush(); err != nil {
		return 0, err
	}
	// The footer: no writer id, the offsets, chunk mode and version, then the CRC.
	foot := binary.BigEndian.AppendUint32(m.out[:0], 0)
	foot = binary.BigEndian.AppendUint64(foot, m.numDocs)
	foot = binary.BigEndian.AppendUint64(foot, storedIndex)
	foot = binary.BigEndian.AppendUint64(foot, sectionsIndex)
	foot = binary.BigEndian.AppendUint32(foot, chunkMode)
	foot = binary.BigEndian.AppendUint32(foot, zap.Version)
	foot = binary.BigEndian.AppendUint32(foot, crc32.Update(m.crc, crc32.IEEETable, foot))
	m.out = foot
	if err := m.flush(); err != nil {
		return 0, err
	}
	return m.base, nil
}

// flush writes out what has been kept of the segment.
func (m *merger) flush() error {
	if len(m.out) == 0 {
		return nil
	}
	if _, err := m.f.Write(m.out); err != nil {
		return err
	}
	m.crc = crc32.Update(m.crc, crc32.IEEETable, m.out)
	m.base += uint64(len(m.out))
	if m.rep != nil {
		m.rep.ReportBytesWritten(uint64(len(m.out)))
	}
	m.out = m.out[:0]
	if m.base-m.releasedAt >= mergeReleaseSize {
		m.releaseInputs()
	}
	return nil
}

// releaseInputs drops the pages of the sources' mappings from the process (see
// mergeReleaseSize). The merge holds its sources open, so the mappings are still theirs.
func (m *merger) releaseInputs() {
	for _, in := range m.ins {
		if in.mapped {
			advise(in.mem, adviceDontNeed)
		}
	}
	m.releasedAt = m.base
}

func (m *merger) flushIfFull() error {
	if len(m.out) < mergeFlushSize {
		return nil
	}
	return m.flush()
}

// writeStored copies the stored values of the documents kept, with the field ids of the
// merged segment, then writes their offsets and the (empty) list of nested documents,
// and returns where the offsets start.
func (m *merger) writeStored() (uint64, error) {
	for _, in := range m.ins {
		if isClosed(m.stop) {
			return 0, segment.ErrClosed
		}
		for d, num := range in.newNums {
			if num == mergeDropped {
				continue
			}
			r := memReader{mem: in.mem, pos: binary.BigEndian.Uint64(in.mem[in.storedIndex+8*uint64(d):]), ok: true}
			start := r.pos
			metaLen, dataLen := r.uvarint(), r.uvarint()
			meta := r.bytes(metaLen)
			r.bytes(dataLen)
			if !r.ok {
				return 0, errors.New("search: merge: stored values past the end of a segment")
			}
			m.storedIdx = append(m.storedIdx, m.pos())
			if m.fieldsSame {
				m.out = append(m.out, in.mem[start:r.pos]...)
			} else {
				var err error
				if m.meta, err = renumberStoredMeta(m.meta[:0], meta, in.newIDs); err != nil {
					return 0, err
				}
				m.out = appendUvarint(m.out, uint64(len(m.meta)))
				m.out = appendUvarint(m.out, dataLen)
				m.out = append(m.out, m.meta...)
				m.out = append(m.out, in.mem[r.pos-dataLen:r.pos]...)
			}
			if err := m.flushIfFull(); err != nil {
				return 0, err
			}
		}
	}
	return m.writeStoredIndex(), nil
}

// renumberStoredMeta appends the header of a document's stored values with the field
// ids of the merged segment: the _id's length, then a record for each value.
func renumberStoredMeta(out, meta []byte, newIDs []uint16) ([]byte, error) {
	r := memReader{mem: meta, ok: true}
	out = appendUvarint(out, r.uvarint())
	out, ok := appendRenumbered(out, meta[min(r.pos, uint64(len(meta))):], newIDs)
	if !ok || !r.ok {
		return nil, errors.New("search: merge: bad stored values header")
	}
	return out, nil
}

// appendRenumbered appends records of varints (a field id, three numbers, a count and
// that many array positions: stored values' field, type, offset and length, or
// locations' field, position, start and end) with the field ids of the merged segment.
func appendRenumbered(out, recs []byte, newIDs []uint16) ([]byte, bool) {
	r := memReader{mem: recs, ok: true}
	for r.ok && r.pos < uint64(len(recs)) {
		field := r.uvarint()
		if field >= uint64(len(newIDs)) {
			return out, false
		}
		out = appendUvarint(out, uint64(newIDs[field]))
		start := r.pos
		r.uvarint()
		r.uvarint()
		r.uvarint()
		for n := r.uvarint(); n > 0 && r.ok; n-- {
			r.uvarint()
		}
		out = append(out, recs[start:min(r.pos, uint64(len(recs)))]...)
	}
	return out, r.ok
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
