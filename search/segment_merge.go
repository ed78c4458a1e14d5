package search

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	zap "github.com/blevesearch/zapx/v17"
)

// Segments are merged here rather than by zapx, into the file zapx's merge writes for the
// same segments and deleted documents (segment_merge_test.go checks them byte for byte).
// The segments are read through scorch_segment_api's interfaces only (dictionaries,
// postings iterators, stored values) and the merged segment is written with the builder's
// code (segment_write.go), a megabyte at a time.
//
// What makes it cheaper than zapx's merge (which decodes every posting, adds each
// document to a roaring bitmap one by one and re-encodes the frequencies through its
// chunk coders, for every field): most postings are of our body and keyword fields, which
// have no frequencies, norms or locations (fields.go). Their documents are taken whole
// from the postings' bitmaps and renumbered in a slice, and their frequency bytes (a zero
// each) written directly. The subject and address fields go through the postings iterator.
//
// Only segments as this package makes them are merged here: zapx's own segment types
// without file callbacks, updated fields or nested documents, with only fields whose
// options this package knows (mergeFieldOptions). Anything else is merged by zapx itself.

// mergeFieldOptions are the indexing options of each field this package's documents have.
var mergeFieldOptions = func() map[string]index.FieldIndexingOptions {
	m := map[string]index.FieldIndexingOptions{
		"_id":    index.IndexField | index.StoreField, // bleve's document id (document.AddIDField)
		fSubject: optText, fFrom: optText, fTo: optText,
		fBody:  optBody,
		fPairs: optStored,
	}
	for _, f := range []string{fInbox, fCat, fReply, fUrgency, fHas, fDay} {
		m[f] = optKeyword
	}
	return m
}()

// mergeDropped is zapx's new number of a document the merge drops.
const mergeDropped = math.MaxUint64

// mergeFlushSize is how much of the merged segment is kept before it is written out.
const mergeFlushSize = 1 << 20

// mergeInput is one segment of a merge.
type mergeInput struct {
	seg     segment.Segment
	numDocs uint64
	newNums []uint64 // each document's number in the merged segment, or mergeDropped
	offset  uint64   // with no document dropped, the new number is the old plus offset
	dropped bool     // some documents are dropped
}

// merger holds the state of one merge.
type merger struct {
	*segBuilder
	ins     []*mergeInput
	numDocs uint64
	ids     map[string]uint16 // field ids of the merged segment

	f    *os.File
	crc  uint32
	rep  segment.StatsReporter
	stop chan struct{}

	// The current term's postings in the merged segment, with the end of each one's
	// frequency and location bytes in tf and lc.
	refs  []segRef
	tfEnd []uint32
	lcEnd []uint32
	tf    []byte
	lc    []byte
	term  []byte
	docs  []uint32 // one segment's documents of the term
	pl    segment.PostingsList
	bm    *roaring.Bitmap // a term's documents read from a segment's file
	it    segment.PostingsIterator
	value []byte // the current document's stored values
}

// mergeSegments merges segs without the documents in drops into a new segment file at
// path, as zapx's Merge does, and returns each segment's new document numbers and the
// file's size; errSegmentUnsupported (and no file) if zapx must merge them.
func mergeSegments(segs []segment.Segment, drops []*roaring.Bitmap, path string,
	closeCh chan struct{}, rep segment.StatsReporter) ([][]uint64, uint64, error) {
	if zapVectors || index.WriterHook != nil || zap.DefaultChunkMode != chunkMode || len(segs) == 0 {
		return nil, 0, errSegmentUnsupported
	}
	m := &merger{rep: rep, stop: closeCh}
	opts := map[string]index.FieldIndexingOptions{}
	for _, s := range segs {
		if !mergeable(s) {
			return nil, 0, errSegmentUnsupported
		}
		for _, name := range s.Fields() {
			o, ok := mergeFieldOptions[name]
			if !ok {
				return nil, 0, errSegmentUnsupported
			}
			opts[name] = o
		}
		m.ins = append(m.ins, &mergeInput{seg: s, numDocs: s.Count()})
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
	names := fieldOrder(opts)
	m.ids = make(map[string]uint16, len(names))
	for id, name := range names {
		m.fields = append(m.fields, segField{name: name, opts: opts[name]})
		m.ids[name] = uint16(id)
	}

	var err error
	if m.f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
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
	return newNums, size, nil
}

// mergeable reports whether s is a segment of zapx's types (the postings it reads are
// zapx's, whose norms it can read back exactly) without what the merger does not write:
// file callbacks, updated fields and nested documents.
func mergeable(s segment.Segment) bool {
	switch s.(type) {
	case *zap.Segment, *zap.SegmentBase:
	default:
		return false
	}
	if c, ok := s.(segment.SegmentWithCallbacks); !ok || c.CallbackId() != "" {
		return false
	}
	if u, ok := s.(segment.UpdatableSegment); !ok || len(u.GetUpdatedFields()) > 0 {
		return false
	}
	n, ok := s.(interface{ CountRoot(*roaring.Bitmap) uint64 })
	return ok && n.CountRoot(nil) == s.Count()
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
		in.offset = m.numDocs
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
	if err := m.writeStoredValues(); err != nil {
		return 0, err
	}
	storedIndex := m.writeStoredIndex()
	addrs := make([]uint64, len(m.fields))
	for id := range m.fields {
		var err error
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
	return nil
}

func (m *merger) flushIfFull() error {
	if len(m.out) < mergeFlushSize {
		return nil
	}
	return m.flush()
}

// writeStoredValues writes the stored values of the documents kept, as the builder
// writes a new document's.
func (m *merger) writeStoredValues() error {
	for _, in := range m.ins {
		if isClosed(m.stop) {
			return segment.ErrClosed
		}
		for d, num := range in.newNums {
			if num == mergeDropped {
				continue
			}
			// The visitor's values are in a buffer zapx reuses: they are copied.
			m.stored, m.value = m.stored[:0], m.value[:0]
			var bad error
			err := in.seg.VisitStoredFields(uint64(d), func(name string, typ byte, value []byte, pos []uint64) bool {
				id, ok := m.ids[name]
				if !ok || len(pos) > 0 {
					bad = errSegmentUnsupported
					return false
				}
				start := len(m.value)
				m.value = append(m.value, value...)
				m.stored = append(m.stored, segStored{field: id, typ: typ, value: m.value[start:len(m.value):len(m.value)]})
				return true
			})
			if err = errors.Join(err, bad); err != nil {
				return err
			}
			// m.value may have moved while it grew: the values are taken again.
			off := 0
			for i := range m.stored {
				n := len(m.stored[i].value)
				m.stored[i].value = m.value[off : off+n]
				off += n
			}
			if err := m.writeStored(uint32(num)); err != nil {
				return err
			}
			if err := m.flushIfFull(); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeCursor walks one segment's dictionary of a field: in its file (file) where it
// can, through the public interfaces (it) otherwise.
type mergeCursor struct {
	in    *mergeInput
	dict  segment.TermDictionary
	it    segment.DictionaryIterator
	file  *fileDict
	term  []byte // the current term (valid until next)
	value uint64 // with file: the term's value in the dictionary
	done  bool
}

func (c *mergeCursor) next() error {
	if c.file != nil {
		ok, err := c.file.next()
		if err != nil || !ok {
			c.done = true
			return err
		}
		c.term, c.value = c.file.current()
		return nil
	}
	e, err := c.it.Next()
	if err != nil {
		return err
	}
	if e == nil {
		c.done = true
		return nil
	}
	c.term = append(c.term[:0], e.Term...)
	return nil
}

// omitCount is zapx's dictionary iterator that does not read each term's postings to
// count them.
type omitCount interface {
	AutomatonIteratorOmitCount(a segment.Automaton, startKeyInclusive, endKeyExclusive []byte) segment.DictionaryIterator
}

// lastPosting is the last posting zapx saw of a term in one segment (zero if none was
// kept), which decides whether a term of one posting is written as a "1-hit".
type lastPosting struct {
	doc, freq, norm uint64
}

// mergeField writes the merged dictionary and postings of field id and returns the
// address of its inverted-index section.
func (m *merger) mergeField(id uint16) (uint64, error) {
	if isClosed(m.stop) {
		return 0, segment.ErrClosed
	}
	if err := m.resetFST(); err != nil {
		return 0, err
	}
	fl := &m.fields[id]
	// Fields without frequencies or locations: only their postings' documents are read.
	bare := fl.opts.SkipFreqNorm() && !fl.opts.IncludeTermVectors()
	var cursors []*mergeCursor
	if fl.opts.IsIndexed() {
		for _, in := range m.ins {
			if !slices.Contains(in.seg.Fields(), fl.name) {
				continue
			}
			dict, err := in.seg.Dictionary(fl.name)
			if err != nil {
				return 0, err
			}
			c := &mergeCursor{in: in, dict: dict}
			if bare {
				if c.file, err = openFileDict(in.seg, fl.name); err != nil {
					return 0, err
				}
			}
			switch oc, ok := dict.(omitCount); {
			case c.file != nil: // next walks the file's dictionary instead
			case ok:
				c.it = oc.AutomatonIteratorOmitCount(nil, nil, nil)
			default:
				c.it = dict.AutomatonIterator(nil, nil, nil)
			}
			if err := c.next(); err != nil {
				return 0, err
			}
			if !c.done {
				cursors = append(cursors, c)
			}
		}
	}
	same := make([]*mergeCursor, 0, len(cursors))
	for n := 0; len(cursors) > 0; n++ {
		if n%1024 == 1023 && isClosed(m.stop) {
			return 0, segment.ErrClosed
		}
		same = same[:0]
		for _, c := range cursors {
			switch {
			case len(same) == 0 || bytes.Compare(c.term, same[0].term) < 0:
				same = append(same[:0], c)
			case bytes.Equal(c.term, same[0].term):
				same = append(same, c)
			}
		}
		m.term = append(m.term[:0], same[0].term...)
		m.refs, m.tf, m.lc, m.tfEnd, m.lcEnd = m.refs[:0], m.tf[:0], m.lc[:0], m.tfEnd[:0], m.lcEnd[:0]
		var last lastPosting
		for _, c := range same {
			var err error
			if last, err = m.addPostings(c, id, bare); err != nil {
				return 0, err
			}
		}
		if err := m.finishTerm(m.term, last); err != nil {
			return 0, err
		}
		for _, c := range same {
			if err := c.next(); err != nil {
				return 0, err
			}
		}
		cursors = slices.DeleteFunc(cursors, func(c *mergeCursor) bool { return c.done })
		if err := m.flushIfFull(); err != nil {
			return 0, err
		}
	}
	addr, err := m.finishField()
	if err != nil {
		return 0, err
	}
	return addr, m.flushIfFull()
}

// normBits is zapx's posting's norm as it is stored (Norm is derived from it).
type normBits interface{ NormUint64() uint64 }

// addPostings adds the postings of the current term in c's segment that are kept, with
// their frequencies and locations.
func (m *merger) addPostings(c *mergeCursor, field uint16, bare bool) (lastPosting, error) {
	var last lastPosting
	in := c.in
	if c.file != nil && !isOneHit(c.value) {
		if m.bm == nil {
			m.bm = roaring.New()
		}
		if err := c.file.bitmap(c.value, m.bm); err != nil {
			return last, err
		}
		return last, m.addDocs(in, m.bm)
	}
	pl, err := c.dict.PostingsList(m.term, nil, m.pl)
	if err != nil {
		return last, err
	}
	m.pl = pl
	if bare {
		it := pl.Iterator(false, false, false, m.it)
		m.it = it
		if o, ok := it.(segment.OptimizablePostingsIterator); ok {
			if _, hit := o.DocNum1Hit(); !hit && o.ActualBitmap() != nil {
				return last, m.addDocs(in, o.ActualBitmap())
			}
		}
	}
	it := pl.Iterator(true, true, true, m.it)
	m.it = it
	for {
		p, err := it.Next()
		if err != nil {
			return last, err
		}
		if p == nil {
			return last, nil
		}
		d := p.Number()
		if d >= in.numDocs {
			return last, fmt.Errorf("search: merge: document %d of a segment of %d", d, in.numDocs)
		}
		num := in.newNums[d]
		if num == mergeDropped {
			continue
		}
		nb, ok := p.(normBits)
		if !ok {
			return last, errSegmentUnsupported
		}
		freq, norm, locs := p.Frequency(), nb.NormUint64(), p.Locations()
		v := freq << 1
		if len(locs) > 0 {
			v |= 1
		}
		m.tf = appendUvarint(m.tf, v)
		if freq > 0 {
			m.tf = appendUvarint(m.tf, norm)
		}
		if len(locs) > 0 {
			if m.lc, err = m.appendLocations(m.lc, field, locs); err != nil {
				return last, err
			}
		}
		m.refs = append(m.refs, segRef{doc: uint32(num)})
		m.tfEnd = append(m.tfEnd, uint32(len(m.tf)))
		m.lcEnd = append(m.lcEnd, uint32(len(m.lc)))
		last = lastPosting{doc: num, freq: freq, norm: norm}
	}
}

// addDocs adds the postings of the documents of bm in segment in that are kept, without
// frequencies or locations.
func (m *merger) addDocs(in *mergeInput, bm *roaring.Bitmap) error {
	if cap(m.docs) == 0 {
		m.docs = make([]uint32, 4096)
	}
	docs := m.docs[:cap(m.docs)]
	it := bm.ManyIterator()
	for n := it.NextMany(docs); n > 0; n = it.NextMany(docs) {
		if uint64(docs[n-1]) >= in.numDocs {
			return fmt.Errorf("search: merge: document %d of a segment of %d", docs[n-1], in.numDocs)
		}
		for _, d := range docs[:n] {
			num := uint64(d) + in.offset
			if in.dropped {
				if num = in.newNums[d]; num == mergeDropped {
					continue
				}
			}
			m.refs = append(m.refs, segRef{doc: uint32(num)})
			m.tf = append(m.tf, 0) // no frequency, no locations
			m.tfEnd = append(m.tfEnd, uint32(len(m.tf)))
			m.lcEnd = append(m.lcEnd, uint32(len(m.lc)))
		}
	}
	return nil
}

// appendLocations appends a posting's locations as zapx writes them: their length, then
// each one's field, position, start, end and (no) array positions.
func (m *merger) appendLocations(out []byte, field uint16, locs []segment.Location) ([]byte, error) {
	n := 0
	for _, l := range locs {
		id := field
		if l.Field() != m.fields[field].name {
			var ok bool
			if id, ok = m.ids[l.Field()]; !ok {
				return out, errSegmentUnsupported
			}
		}
		if len(l.ArrayPositions()) > 0 {
			return out, errSegmentUnsupported
		}
		n += uvarintLen(uint64(id)) + uvarintLen(l.Pos()) + uvarintLen(l.Start()) + uvarintLen(l.End()) + 1
	}
	out = appendUvarint(out, uint64(n))
	for _, l := range locs {
		id := field
		if l.Field() != m.fields[field].name {
			id = m.ids[l.Field()]
		}
		out = appendUvarint(out, uint64(id))
		out = appendUvarint(out, l.Pos())
		out = appendUvarint(out, l.Start())
		out = appendUvarint(out, l.End())
		out = append(out, 0)
	}
	return out, nil
}

// finishTerm writes the postings gathered of term and adds it to the dictionary: as a
// "1-hit" if zapx would (one posting, of frequency 1, without locations), not at all if
// every posting was dropped.
func (m *merger) finishTerm(term []byte, last lastPosting) error {
	card := len(m.refs)
	if card == 0 {
		return nil
	}
	if card == 1 && len(m.lc) == 0 && last.freq == 1 && last.doc == uint64(m.refs[0].doc) && last.doc < 1<<31 {
		return m.fst.Insert(term, zap.FSTValEncode1Hit(last.doc, last.norm))
	}
	chunk, chunks := chunkLayout(int(m.numDocs), card)
	ends := m.chunkEnds(chunks)
	for i, r := range m.refs {
		ends[r.doc/chunk] = uint64(m.tfEnd[i])
	}
	tfOffset := m.appendChunked(m.tf, ends)
	ends = m.chunkEnds(chunks)
	for i, r := range m.refs {
		ends[r.doc/chunk] = uint64(m.lcEnd[i])
	}
	locOffset := m.appendChunked(m.lc, ends)
	return m.fst.Insert(term, m.appendPostingsRecord(tfOffset, locOffset, m.refs))
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
