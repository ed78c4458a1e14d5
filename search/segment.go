package search

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2/document"
	index "github.com/blevesearch/bleve_index_api"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/blevesearch/vellum"
	zap "github.com/blevesearch/zapx/v17"
)

// The segments of a batch are built here rather than by zapx: the bytes are the same as
// zapx.New writes for the same documents (segment_test.go checks them byte for byte), so
// zapx opens and searches them as its own (and merges them where segment_merge.go does
// not), but the building is cheaper (about a third of zapx's CPU: BENCHMARKS.md, "Segment
// builder").
// zapx keeps per posting a bitmap insert, two map lookups and a copy of the term for doc
// values; here each posting is one map lookup and an append to a flat list, which is then
// grouped by term in one counting sort (documents arrive in order, so every term's
// postings come out sorted by document), and each term's bitmap is written straight from
// its sorted document numbers.
//
// Only what this package's documents hold is handled: plain fields (ours and bleve's _id),
// no doc values, array positions, composite or nested documents, and each field at most
// once a document. Anything else is refused (errSegmentUnsupported) and the batch is built
// by zapx itself (segment_plugin.go).

var errSegmentUnsupported = errors.New("search: batch not supported by the segment builder")

// segBuilder holds the working memory of building one segment (newBuilder).
type segBuilder struct {
	numDocs int

	fields   []segField // by field id: _id first, then the others by name
	fieldIDs map[string]uint16

	terms    []segTerm    // every distinct term of every field, in order of first sight
	postings []segPosting // in document order
	freqs    []segFreq    // of the postings that have a frequency or locations
	locs     []segLoc
	grouped  []segRef // postings grouped by term (segTerm.start), each group by document
	next     []uint32 // groupPostings: where each term's next posting goes
	sortKeys []termKey

	stored    []segStored // the current document's stored values
	storedIdx []uint64    // offset of each document's stored values
	storedBuf []byte      // the current document's stored bytes, before compression
	snappyBuf []byte

	out     []byte // the segment
	base    uint64 // bytes written before out (none: a segment is built whole in out)
	scratch []byte
	key     []byte // the term being inserted in the dictionary
	ends    []uint64
	fst     *vellum.Builder
	fstBuf  bytes.Buffer

	fieldTerms map[string]int // sizeFor: each field's expected distinct terms
}

type segField struct {
	name  string
	opts  index.FieldIndexingOptions
	dict  map[string]uint32 // term -> index in segBuilder.terms
	terms []uint32          // the field's terms (sorted before writing)
	seen  int               // 1 + the last document holding the field
}

type segTerm struct {
	term  string
	count uint32 // postings
	start uint32 // first of its postings in segBuilder.grouped
}

type segPosting struct {
	term uint32
	ref  segRef
}

// segRef is a posting of a known term: the document and, if it has a frequency or
// locations, 1 + its index in segBuilder.freqs.
type segRef struct {
	doc  uint32
	freq uint32
}

type segFreq struct {
	freq     uint64
	norm     uint32 // the field's analyzed length, which zapx keeps as the norm's bits
	locStart uint32
	locEnd   uint32
}

type segLoc struct {
	pos, start, end uint64
}

type segStored struct {
	field uint16
	typ   byte
	value []byte
}

// A builder lives for one segment. Builders used to be kept between segments, so their
// buffers were not grown from nothing by every batch; but between batches the two kept
// took ~25 MB of the live heap, which the collector marks on every cycle and the memory
// limit counts (runtime.go). Instead a build sizes its buffers from the one before
// (buildMemory) and allocates each once. Measured beside the other memory changes of the
// eleventh session (BENCHMARKS.md).
func newBuilder() *segBuilder { return &segBuilder{fieldIDs: map[string]uint16{}} }

// buildSizes is what a segment build of docs documents took: postings, frequencies,
// locations, bytes of the segment, distinct terms, and each field's distinct terms.
type buildSizes struct {
	docs, postings, freqs, locs, out, terms int
	fieldTerms                              map[string]int
}

// buildMemory is what the last segment built took (a new map each time: sizeFor reads it
// unlocked). The segment plugin keeps one.
type buildMemory struct {
	mu   sync.Mutex
	last buildSizes
}

func (m *buildMemory) get() buildSizes {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

func (m *buildMemory) set(s buildSizes) {
	m.mu.Lock()
	m.last = s
	m.mu.Unlock()
}

// sizeFor gives b's buffers the capacity n documents are likely to take, from the last
// build, with a quarter more: a buffer that runs out is copied into one twice its size.
// Postings, frequencies, locations and bytes grow with the documents; distinct terms grow
// more slowly, so they are scaled down for fewer documents and not up for more (a batch
// of one message after an idle spell would otherwise size the next full batch for a
// thousand times its terms).
func (b *segBuilder) sizeFor(n int, last buildSizes) {
	if last.docs == 0 {
		return
	}
	linear := func(l int) int { return l * n / last.docs * 5 / 4 }
	terms := func(l int) int { return l * min(n, last.docs) / last.docs * 5 / 4 }
	b.postings = make([]segPosting, 0, linear(last.postings))
	b.freqs = make([]segFreq, 0, linear(last.freqs))
	b.locs = make([]segLoc, 0, linear(last.locs))
	b.out = make([]byte, 0, linear(last.out))
	b.terms = make([]segTerm, 0, terms(last.terms))
	b.fieldTerms = make(map[string]int, len(last.fieldTerms))
	for name, l := range last.fieldTerms {
		b.fieldTerms[name] = terms(l)
	}
}

// sizes returns what b took for its n documents, for the next build's sizeFor.
func (b *segBuilder) sizes(n int, out int) buildSizes {
	sizes := buildSizes{docs: n, postings: len(b.postings), freqs: len(b.freqs), locs: len(b.locs),
		out: out, terms: len(b.terms), fieldTerms: make(map[string]int, len(b.fields))}
	for _, f := range b.fields {
		sizes.fieldTerms[f.name] = len(f.terms)
	}
	return sizes
}

// buildSegment builds the segment of docs as zapx's New would, or returns
// errSegmentUnsupported if docs hold something the builder does not handle (the
// documents are left as they were, for zapx to build). mem, if not nil, holds what the last
// build took and gets what this one took.
func buildSegment(docs []index.Document, config map[string]interface{}, mem *buildMemory) (*zap.SegmentBase, uint64, error) {
	if len(docs) == 0 || len(docs) >= 1<<16 || zapVectors || zap.DefaultChunkMode != chunkMode {
		// Past 65,535 documents a term can fill one of roaring's containers, which roaring
		// turns into a run container (appendRoaring writes none). The sections and the
		// chunking are zapx's as this package knows them (segment_write.go).
		return nil, 0, errSegmentUnsupported
	}
	b := newBuilder()
	if mem != nil {
		b.sizeFor(len(docs), mem.get()) // before defineFields, which sizes each field's terms
	}
	if err := b.defineFields(docs); err != nil {
		return nil, 0, err
	}
	for i, d := range docs {
		if err := b.addDocument(uint32(i), d); err != nil {
			return nil, 0, err
		}
	}
	storedIndexOffset := b.writeStoredIndex()
	b.groupPostings()
	addrs := make([]uint64, len(b.fields))
	for id := range b.fields {
		addr, err := b.writeField(uint16(id))
		if err != nil {
			return nil, 0, err
		}
		addrs[id] = addr
	}
	sectionsIndexOffset := b.writeSectionsIndex(addrs)

	stats, _ := config[segment.StatsKey].(*segment.Stats)
	if stats == nil {
		stats = new(segment.Stats)
	}
	out := b.out
	if mem != nil {
		mem.set(b.sizes(len(docs), len(out)))
	}
	sb, err := zap.InitSegmentBase(out, crc32.ChecksumIEEE(out), zap.DefaultChunkMode, uint64(len(docs)),
		storedIndexOffset, sectionsIndexOffset, config, stats)
	if err != nil {
		return nil, 0, err
	}
	// The counts zapx keeps (every document here has at least its _id field).
	atomic.AddUint64(&stats.TotNewRootDocsProcessed, uint64(len(docs)))
	atomic.AddUint64(&stats.TotNewDocsProcessed, uint64(len(docs)))
	atomic.AddUint64(&stats.TotNewDocsIndexed, uint64(len(docs)))
	return sb, uint64(len(out)), nil
}

// defineFields numbers the fields of the batch as zapx does (_id, then by name), with the
// union of each one's options, and checks that the builder handles every field.
func (b *segBuilder) defineFields(docs []index.Document) error {
	b.numDocs = len(docs)
	opts := map[string]index.FieldIndexingOptions{"_id": index.IndexField | index.StoreField}
	ok := true
	for _, d := range docs {
		if nd, isNested := d.(index.NestedDocument); isNested {
			nd.VisitNestedDocuments(func(index.Document) { ok = false })
		}
		d.VisitComposite(func(index.CompositeField) { ok = false })
		d.VisitFields(func(f index.Field) {
			switch f.(type) {
			case *field, *document.TextField:
			default:
				ok = false
			}
			o := f.Options()
			if o.IncludeDocValues() || len(f.ArrayPositions()) > 0 {
				ok = false
			}
			opts[f.Name()] |= o
		})
		if !ok {
			return errSegmentUnsupported
		}
	}
	names := fieldOrder(opts)
	b.fields = make([]segField, len(names))
	for id, name := range names {
		b.fieldIDs[name] = uint16(id)
		n := b.fieldTerms[name]
		b.fields[id] = segField{name: name, opts: opts[name], dict: make(map[string]uint32, n), terms: make([]uint32, 0, n)}
	}
	return nil
}

// fieldOrder returns the names of fields in zapx's order of their ids: _id, then the
// others by name.
func fieldOrder[V any](fields map[string]V) []string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		if name != "_id" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return append([]string{"_id"}, names...)
}

// addDocument collects the postings of document doc and writes its stored values.
func (b *segBuilder) addDocument(doc uint32, d index.Document) error {
	var err error
	b.stored = b.stored[:0]
	d.VisitFields(func(f index.Field) {
		if err != nil {
			return
		}
		id := b.fieldIDs[f.Name()]
		fl := &b.fields[id]
		if fl.seen == int(doc)+1 {
			err = errSegmentUnsupported // zapx merges the term frequencies of repeated fields
			return
		}
		fl.seen = int(doc) + 1
		if f.Options().IsStored() {
			b.stored = append(b.stored, segStored{field: id, typ: f.EncodedFieldType(), value: f.Value()})
		}
		if verr := zap.ValidateDocFields(f); verr != nil {
			err = verr
			return
		}
		err = b.addPostings(doc, fl, f)
	})
	if err != nil {
		return err
	}
	return b.writeStored(doc)
}

// addPostings adds a posting of doc for each term of field f.
func (b *segBuilder) addPostings(doc uint32, fl *segField, f index.Field) error {
	norm := uint32(f.AnalyzedLength())
	// Our body and keyword fields have neither frequencies nor locations (fields.go): their
	// term frequencies need not be read, which saves a cache miss a posting.
	if ff, ok := f.(*field); ok && (ff.kind == kindBody || ff.kind == kindKeyword) {
		for _, term := range ff.terms {
			b.addPosting(fl, term, segRef{doc: doc})
		}
		return nil
	}
	for term, tf := range f.AnalyzedTokenFrequencies() {
		ref := segRef{doc: doc}
		if tf.Frequency() > 0 || len(tf.Locations) > 0 {
			start := len(b.locs)
			for _, l := range tf.Locations {
				if l.Field != "" || len(l.ArrayPositions) > 0 {
					return errSegmentUnsupported
				}
				b.locs = append(b.locs, segLoc{pos: uint64(l.Position), start: uint64(l.Start), end: uint64(l.End)})
			}
			b.freqs = append(b.freqs, segFreq{freq: uint64(tf.Frequency()), norm: norm, locStart: uint32(start), locEnd: uint32(len(b.locs))})
			ref.freq = uint32(len(b.freqs))
		}
		b.addPosting(fl, term, ref)
	}
	return nil
}

// addPosting adds the posting ref of term in field fl, numbering the term on first sight.
func (b *segBuilder) addPosting(fl *segField, term string, ref segRef) {
	t, ok := fl.dict[term]
	if !ok {
		t = uint32(len(b.terms))
		b.terms = append(b.terms, segTerm{term: term})
		fl.dict[term] = t
		fl.terms = append(fl.terms, t)
	}
	b.terms[t].count++
	b.postings = append(b.postings, segPosting{term: t, ref: ref})
}

// groupPostings orders the postings by term, each term's by document (a counting sort:
// the postings were collected in document order).
func (b *segBuilder) groupPostings() {
	n := uint32(0)
	for i := range b.terms {
		b.terms[i].start = n
		n += b.terms[i].count
	}
	b.grouped = slices.Grow(b.grouped[:0], int(n))[:n]
	next := slices.Grow(b.next[:0], len(b.terms))
	for i := range b.terms {
		next = append(next, b.terms[i].start)
	}
	b.next = next
	for _, p := range b.postings {
		b.grouped[next[p.term]] = p.ref
		next[p.term]++
	}
}

// writeField writes the postings and dictionary of field id and returns the address of
// its inverted-index section.
func (b *segBuilder) writeField(id uint16) (uint64, error) {
	fl := &b.fields[id]
	b.sortTerms(fl.terms)
	if err := b.resetFST(); err != nil {
		return 0, err
	}
	for _, t := range fl.terms {
		st := &b.terms[t]
		refs := b.grouped[st.start : st.start+st.count]
		offset := b.writePostings(id, refs)
		b.key = append(b.key[:0], st.term...) // vellum copies the key it keeps
		if err := b.fst.Insert(b.key, offset); err != nil {
			return 0, err
		}
	}
	return b.finishField()
}

// finishField writes the dictionary built in b.fst and the field's inverted-index
// section, and returns the section's address.
func (b *segBuilder) finishField() (uint64, error) {
	if err := b.fst.Close(); err != nil {
		return 0, err
	}
	dictOffset := b.pos()
	b.out = appendUvarint(b.out, uint64(b.fstBuf.Len()))
	b.out = append(b.out, b.fstBuf.Bytes()...)
	addr := b.pos()
	// No doc values: both their offsets are "none".
	b.out = appendUvarint(b.out, noDocValues)
	b.out = appendUvarint(b.out, noDocValues)
	b.out = appendUvarint(b.out, dictOffset)
	return addr, nil
}

// sortTerms sorts term ids by their terms. Most comparisons are decided by the first
// eight bytes, compared as one number (zero-padded: a shorter term that ties with a
// longer one's prefix is decided by the strings).
func (b *segBuilder) sortTerms(ids []uint32) {
	keys := slices.Grow(b.sortKeys[:0], len(ids))
	for _, id := range ids {
		var k [8]byte
		copy(k[:], b.terms[id].term)
		keys = append(keys, termKey{prefix: binary.BigEndian.Uint64(k[:]), id: id})
	}
	slices.SortFunc(keys, func(x, y termKey) int {
		if x.prefix != y.prefix {
			return cmp.Compare(x.prefix, y.prefix)
		}
		return strings.Compare(b.terms[x.id].term, b.terms[y.id].term)
	})
	for i, k := range keys {
		ids[i] = k.id
	}
	b.sortKeys = keys
}

type termKey struct {
	prefix uint64
	id     uint32
}

func (b *segBuilder) resetFST() error {
	b.fstBuf.Reset()
	if b.fst == nil {
		var err error
		b.fst, err = vellum.New(&b.fstBuf, nil)
		return err
	}
	return b.fst.Reset(&b.fstBuf)
}
