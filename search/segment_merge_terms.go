package search

import (
	"bytes"
	"errors"
	"slices"

	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/blevesearch/vellum"
	zap "github.com/blevesearch/zapx/v17"
)

// The postings of a merge: each field's terms are walked in order across the segments'
// dictionaries, and each term's postings are gathered from every segment holding it.

var errMergeCorrupt = errors.New("search: merge: postings past the end of a segment")

// termCursor walks one segment's dictionary of a field.
type termCursor struct {
	in *mergeInput
	it vellum.Iterator
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
	var cursors []termCursor
	if fl.opts.IsIndexed() {
		for _, in := range m.ins {
			fid := slices.Index(in.fields, fl.name)
			if fid < 0 {
				continue
			}
			fst, err := in.dictionary(fid)
			if err != nil {
				return 0, err
			}
			it, err := fst.Iterator(nil, nil)
			if errors.Is(err, vellum.ErrIteratorDone) {
				continue
			}
			if err != nil {
				return 0, err
			}
			cursors = append(cursors, termCursor{in: in, it: it})
		}
	}
	var term []byte
	same := make([]int, 0, len(cursors))
	for n := 0; len(cursors) > 0; n++ {
		if n%1024 == 1023 && isClosed(m.stop) {
			return 0, segment.ErrClosed
		}
		same = same[:0]
		var low []byte
		for i, c := range cursors {
			k, _ := c.it.Current()
			switch cmp := bytes.Compare(k, low); {
			case len(same) == 0 || cmp < 0:
				low = k
				same = append(same[:0], i)
			case cmp == 0:
				same = append(same, i)
			}
		}
		term = append(term[:0], low...)
		m.refs, m.tf, m.locs, m.tfEnd, m.lcEnd = m.refs[:0], m.tf[:0], m.locs[:0], m.tfEnd[:0], m.lcEnd[:0]
		var last lastPosting
		for _, i := range same {
			_, val := cursors[i].it.Current()
			var err error
			if last, err = m.addPostings(cursors[i].in, val); err != nil {
				return 0, err
			}
		}
		if err := m.finishTerm(term, last); err != nil {
			return 0, err
		}
		// Advance the cursors that were on the term, dropping those at their end.
		kept := cursors[:0]
		for i, c := range cursors {
			if slices.Contains(same, i) {
				if err := c.it.Next(); errors.Is(err, vellum.ErrIteratorDone) {
					continue
				} else if err != nil {
					return 0, err
				}
			}
			kept = append(kept, c)
		}
		cursors = kept
		if err := m.flushIfFull(); err != nil {
			return 0, err
		}
	}
	return m.finishField()
}

// addPostings adds the postings of a term in segment in (val is its dictionary value) that
// are kept, with their frequency and location bytes.
func (m *merger) addPostings(in *mergeInput, val uint64) (lastPosting, error) {
	var last lastPosting
	if val&zap.FSTValEncodingMask == zap.FSTValEncoding1Hit {
		doc, norm := zap.FSTValDecode1Hit(val)
		if doc >= in.numDocs {
			return last, errMergeCorrupt
		}
		num := in.newNums[doc]
		if num == mergeDropped {
			return last, nil
		}
		m.refs = append(m.refs, segRef{doc: uint32(num)})
		m.tf = appendUvarint(append(m.tf, 2), norm) // frequency 1, no locations
		m.tfEnd = append(m.tfEnd, uint32(len(m.tf)))
		m.lcEnd = append(m.lcEnd, uint32(len(m.locs)))
		return lastPosting{doc: num, freq: 1, norm: norm}, nil
	}
	r := memReader{mem: in.mem, pos: val, ok: true}
	tfOffset, locOffset := r.uvarint(), r.uvarint()
	bm := r.bytes(r.uvarint())
	var ok bool
	if m.docs, ok = appendRoaringDocs(m.docs[:0], bm); !ok || !r.ok {
		return last, errMergeCorrupt
	}
	tr := chunkedReader(in.mem, tfOffset)
	lr := chunkedReader(in.mem, locOffset)
	for _, doc := range m.docs {
		start := tr.pos
		v := tr.uvarint()
		var norm uint64
		if v>>1 > 0 {
			norm = tr.uvarint()
		}
		end := tr.pos
		var locs []byte
		if v&1 != 0 {
			ls := lr.pos
			lr.bytes(lr.uvarint())
			locs = in.mem[ls:lr.pos]
		}
		if uint64(doc) >= in.numDocs || !tr.ok || !lr.ok {
			return last, errMergeCorrupt
		}
		num := in.newNums[doc]
		if num == mergeDropped {
			continue
		}
		m.refs = append(m.refs, segRef{doc: uint32(num)})
		m.tf = append(m.tf, in.mem[start:end]...)
		m.tfEnd = append(m.tfEnd, uint32(len(m.tf)))
		if len(locs) > 0 {
			if m.fieldsSame {
				m.locs = append(m.locs, locs...)
			} else if m.locs, ok = renumberLocs(m.locs, locs, in.newIDs); !ok {
				return last, errMergeCorrupt
			}
		}
		m.lcEnd = append(m.lcEnd, uint32(len(m.locs)))
		last = lastPosting{doc: num, freq: v >> 1, norm: norm}
	}
	return last, nil
}

// chunkedReader reads the postings of chunked data at offset (none at 0) one after the
// other: the chunks follow each other.
func chunkedReader(mem []byte, offset uint64) memReader {
	r := memReader{mem: mem, pos: offset, ok: true}
	if offset == 0 {
		r.mem = nil // a read finds no data
		return r
	}
	for n := r.uvarint(); n > 0 && r.ok; n-- {
		r.uvarint()
	}
	return r
}

// renumberLocs appends a posting's locations (their length, then a record for each)
// with the field ids of the merged segment.
func renumberLocs(out, locs []byte, newIDs []uint16) ([]byte, bool) {
	r := memReader{mem: locs, ok: true}
	if n := r.uvarint(); !r.ok || r.pos+n != uint64(len(locs)) {
		return out, false
	}
	start := len(out)
	out, ok := appendRenumbered(out, locs[r.pos:], newIDs)
	// The length goes first: the renumbered records are moved after it.
	enc := slices.Clone(out[start:])
	out = appendUvarint(out[:start], uint64(len(enc)))
	return append(out, enc...), ok
}

// finishTerm writes the postings gathered of term and adds it to the dictionary: as a
// "1-hit" if zapx would (one posting, of frequency 1, without locations), not at all if
// every posting was dropped.
func (m *merger) finishTerm(term []byte, last lastPosting) error {
	card := len(m.refs)
	if card == 0 {
		return nil
	}
	if card == 1 && len(m.locs) == 0 && last.freq == 1 && last.doc == uint64(m.refs[0].doc) && last.doc < 1<<31 {
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
	locOffset := m.appendChunked(m.locs, ends)
	return m.fst.Insert(term, m.appendPostingsRecord(tfOffset, locOffset, m.refs))
}
