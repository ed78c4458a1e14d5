package search

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"

	zap "github.com/blevesearch/zapx/v17"
	"github.com/golang/snappy"
)

// The encodings of zap v17 that segBuilder writes (zapx's zap.md describes the layout):
// stored values, then each field's postings and dictionary, then the fields and their
// sections, all in one buffer whose CRC and offsets go into the footer.

// noDocValues is the doc-values offset of a field without doc values.
const noDocValues = math.MaxUint64

// segSections are the sections zapx writes for every field, in a zapx built without the
// "vectors" tag (segment_vectors.go): the inverted index, and the synonym and geo-shape
// sections, which our fields never use (address 0). zapx lists them in map order; the
// order carries no meaning, so they are written here in ascending order.
var segSections = []uint16{zap.SectionInvertedTextIndex, zap.SectionSynonymIndex, zap.SectionGeoShapeV2Index}

// Postings are cut into chunks of documents for skipping. In zapx's chunk mode 1026 (its
// default) a term's postings are cut into len/chunkDocs+1 chunks of equal document ranges.
const (
	chunkMode = 1026
	chunkDocs = 1024
)

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// pos is the offset in the segment of the next byte written.
func (b *segBuilder) pos() uint64 { return b.base + uint64(len(b.out)) }

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// writeStored writes document doc's stored values: a header of varints (the _id's length,
// then field, type, offset, length and no array positions for each other value, by field)
// and the _id followed by the other values compressed with snappy.
func (b *segBuilder) writeStored(doc uint32) error {
	slices.SortStableFunc(b.stored, func(x, y segStored) int { return int(x.field) - int(y.field) })
	if len(b.stored) == 0 || b.stored[0].field != 0 {
		return errSegmentUnsupported // zapx requires a stored _id
	}
	id := b.stored[0].value
	meta := appendUvarint(b.scratch[:0], uint64(len(id)))
	data := b.storedBuf[:0]
	for _, s := range b.stored[1:] {
		meta = appendUvarint(meta, uint64(s.field))
		meta = appendUvarint(meta, uint64(s.typ))
		meta = appendUvarint(meta, uint64(len(data)))
		meta = appendUvarint(meta, uint64(len(s.value)))
		meta = appendUvarint(meta, 0)
		data = append(data, s.value...)
	}
	b.snappyBuf = snappy.Encode(b.snappyBuf[:cap(b.snappyBuf)], data)
	b.storedIdx = append(b.storedIdx, b.pos())
	b.out = appendUvarint(b.out, uint64(len(meta)))
	b.out = appendUvarint(b.out, uint64(len(id)+len(b.snappyBuf)))
	b.out = append(b.out, meta...)
	b.out = append(b.out, id...)
	b.out = append(b.out, b.snappyBuf...)
	b.scratch, b.storedBuf = meta, data
	return nil
}

// writeStoredIndex writes the offsets of the documents' stored values and the (empty)
// list of nested documents, and returns where the offsets start.
func (b *segBuilder) writeStoredIndex() uint64 {
	start := b.pos()
	for _, off := range b.storedIdx {
		b.out = binary.BigEndian.AppendUint64(b.out, off)
	}
	b.out = appendUvarint(b.out, 0)
	return start
}

// writePostings writes one term's postings in field id: the chunked frequencies and
// norms, the chunked locations (if any), then the record the dictionary points to (their
// offsets and the bitmap of documents). It returns the record's offset.
func (b *segBuilder) writePostings(id uint16, refs []segRef) uint64 {
	chunk, chunks := chunkLayout(b.numDocs, len(refs))

	enc := b.scratch[:0]
	ends := b.chunkEnds(chunks)
	for _, r := range refs {
		if r.freq == 0 {
			enc = append(enc, 0) // no frequency, no locations
		} else {
			f := &b.freqs[r.freq-1]
			v := f.freq << 1
			if f.locEnd > f.locStart {
				v |= 1
			}
			enc = appendUvarint(enc, v)
			if f.freq > 0 {
				enc = appendUvarint(enc, uint64(f.norm))
			}
		}
		ends[r.doc/chunk] = uint64(len(enc))
	}
	tfOffset := b.appendChunked(enc, ends)

	enc = enc[:0]
	ends = b.chunkEnds(chunks)
	for _, r := range refs {
		if r.freq == 0 {
			continue
		}
		f := &b.freqs[r.freq-1]
		if f.locEnd == f.locStart {
			continue
		}
		locs := b.locs[f.locStart:f.locEnd]
		n := 0
		for _, l := range locs {
			n += uvarintLen(uint64(id)) + uvarintLen(l.pos) + uvarintLen(l.start) + uvarintLen(l.end) + 1
		}
		enc = appendUvarint(enc, uint64(n))
		for _, l := range locs {
			enc = appendUvarint(enc, uint64(id))
			enc = appendUvarint(enc, l.pos)
			enc = appendUvarint(enc, l.start)
			enc = appendUvarint(enc, l.end)
			enc = append(enc, 0) // no array positions
		}
		ends[r.doc/chunk] = uint64(len(enc))
	}
	locOffset := b.appendChunked(enc, ends)
	b.scratch = enc
	return b.appendPostingsRecord(tfOffset, locOffset, refs)
}

// chunkLayout returns the documents a chunk spans and the number of chunks of a term with
// card postings in a segment of numDocs documents.
func chunkLayout(numDocs, card int) (chunk uint32, chunks int) {
	chunk = uint32(numDocs / (card/chunkDocs + 1))
	return chunk, (numDocs-1)/int(chunk) + 1
}

// appendPostingsRecord writes the record a term's dictionary entry points to and returns
// its offset: where its frequencies and locations are and the bitmap of refs' documents.
func (b *segBuilder) appendPostingsRecord(tfOffset, locOffset uint64, refs []segRef) uint64 {
	offset := b.pos()
	b.out = appendUvarint(b.out, tfOffset)
	b.out = appendUvarint(b.out, locOffset)
	b.out = appendRoaring(b.out, refs)
	return offset
}

// chunkEnds returns n zeroed chunk end offsets.
func (b *segBuilder) chunkEnds(n int) []uint64 {
	b.ends = slices.Grow(b.ends[:0], n)[:n]
	clear(b.ends)
	return b.ends
}

// appendChunked writes chunked data: the number of chunks, each chunk's end offset, then
// the data. ends holds the end of the last chunk with data where it was set and 0
// elsewhere. It returns where it was written, or 0 (nothing written) for no data.
func (b *segBuilder) appendChunked(data []byte, ends []uint64) uint64 {
	if len(data) == 0 {
		return 0
	}
	start := b.pos()
	b.out = appendUvarint(b.out, uint64(len(ends)))
	var end uint64
	for _, e := range ends {
		end = max(end, e) // a chunk without postings ends where the one before it does
		b.out = appendUvarint(b.out, end)
	}
	b.out = append(b.out, data...)
	return start
}

// appendRoaring appends the length and the bytes of the roaring bitmap of refs'
// documents (ascending), as roaring's own serialization writes a bitmap built by
// adding them: containers of 65,536 numbers, each an array of up to 4,096 16-bit values,
// a 1,024-word bitmap, or, when full, the one run roaring turns a full bitmap into (a
// merge can fill one; buildSegment keeps segments below 65,536 documents).
func appendRoaring(out []byte, refs []segRef) []byte {
	nc, size, runs := 0, 0, false
	for i := 0; i < len(refs); {
		j := containerEnd(refs, i)
		nc++
		size += containerSize(j - i)
		runs = runs || j-i == 1<<16
		i = j
	}
	// The header: a cookie and the number of containers (with runs: one word, then a bit
	// a container telling the runs), a key and cardinality for each, then each one's
	// offset (with runs, only from 4 containers on).
	header := 8 + 4*nc
	if runs {
		header = 4 + (nc+7)/8 + 4*nc
	}
	if !runs || nc >= 4 {
		header += 4 * nc
	}
	out = appendUvarint(out, uint64(header+size))
	if runs {
		out = binary.LittleEndian.AppendUint16(out, 12347)
		out = binary.LittleEndian.AppendUint16(out, uint16(nc-1))
		flags := len(out)
		out = append(out, make([]byte, (nc+7)/8)...)
		for c, i := 0, 0; i < len(refs); c++ {
			j := containerEnd(refs, i)
			if j-i == 1<<16 {
				out[flags+c/8] |= 1 << (c % 8)
			}
			i = j
		}
	} else {
		out = binary.LittleEndian.AppendUint32(out, 12346)
		out = binary.LittleEndian.AppendUint32(out, uint32(nc))
	}
	for i := 0; i < len(refs); {
		j := containerEnd(refs, i)
		out = binary.LittleEndian.AppendUint16(out, uint16(refs[i].doc>>16))
		out = binary.LittleEndian.AppendUint16(out, uint16(j-i-1))
		i = j
	}
	if !runs || nc >= 4 {
		offset := header
		for i := 0; i < len(refs); {
			j := containerEnd(refs, i)
			out = binary.LittleEndian.AppendUint32(out, uint32(offset))
			offset += containerSize(j - i)
			i = j
		}
	}
	for i := 0; i < len(refs); {
		j := containerEnd(refs, i)
		switch {
		case j-i == 1<<16: // one run: from 0, 65,536 long
			out = append(out, 1, 0, 0, 0, 0xff, 0xff)
		case j-i <= 4096:
			for _, r := range refs[i:j] {
				out = binary.LittleEndian.AppendUint16(out, uint16(r.doc))
			}
		default:
			var words [1024]uint64
			for _, r := range refs[i:j] {
				words[uint16(r.doc)>>6] |= 1 << (r.doc & 63)
			}
			for _, w := range words {
				out = binary.LittleEndian.AppendUint64(out, w)
			}
		}
		i = j
	}
	return out
}

// containerEnd returns the end of the roaring container that starts at refs[i].
func containerEnd(refs []segRef, i int) int {
	key := refs[i].doc >> 16
	j := i
	for j < len(refs) && refs[j].doc>>16 == key {
		j++
	}
	return j
}

func containerSize(card int) int {
	switch {
	case card == 1<<16:
		return 6
	case card > 4096:
		return 8192
	}
	return 2 * card
}

// writeSectionsIndex writes each field's name, options and section addresses, then the
// offsets of those records, and returns where the offsets start.
func (b *segBuilder) writeSectionsIndex(addrs []uint64) uint64 {
	starts := make([]uint64, len(b.fields))
	for id := range b.fields {
		fl := &b.fields[id]
		starts[id] = b.pos()
		b.out = appendUvarint(b.out, uint64(len(fl.name)))
		b.out = append(b.out, fl.name...)
		b.out = appendUvarint(b.out, uint64(fl.opts))
		b.out = appendUvarint(b.out, uint64(len(segSections)))
		for _, sec := range segSections {
			b.out = binary.BigEndian.AppendUint16(b.out, sec)
			var addr uint64
			if sec == zap.SectionInvertedTextIndex {
				addr = addrs[id]
			}
			b.out = binary.BigEndian.AppendUint64(b.out, addr)
		}
	}
	start := b.pos()
	b.out = appendUvarint(b.out, uint64(len(b.fields)))
	for _, s := range starts {
		b.out = binary.BigEndian.AppendUint64(b.out, s)
	}
	return start
}
