package search

import (
	"errors"
	"fmt"

	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/blevesearch/vellum"
	zap "github.com/blevesearch/zapx/v17"
)

// segmentKeys returns the keys of seg's documents by document number.
//
// A document's id is a term of the _id field whose dictionary value names its one
// document, so the keys are read from that dictionary (~15 bytes a document). The stored
// values hold the ids too, but with each message's pair filter beside them: ~30 times the
// bytes. Every page the server reads through a segment's memory map stays in its resident
// memory for as long as the segment is open, and the keys of every segment are read when
// the index opens (Index.warm).
func segmentKeys(seg segment.Segment) ([]docKey, error) {
	keys, err := keysFromDictionary(seg)
	if errors.Is(err, errSegmentUnsupported) {
		return keysFromStored(seg)
	}
	return keys, err
}

// keysFromDictionary reads the keys from the _id dictionary, or returns
// errSegmentUnsupported for a segment the merger would not read, or whose ids are not
// one document each.
func keysFromDictionary(seg segment.Segment) ([]docKey, error) {
	in, err := readMergeInput(seg)
	if err != nil {
		return nil, err
	}
	// readMergeInput checked that field 0 is _id.
	dict, err := in.dictionaryBytes(0)
	if err != nil {
		return nil, err
	}
	if _, file := seg.(*zap.Segment); file {
		adviseWillNeed(dict) // read whole, in order: ahead, not a page a fault
	}
	fst, err := vellum.Load(dict)
	if err != nil {
		return nil, err
	}
	keys := make([]docKey, in.numDocs)
	seen := make([]uint64, (in.numDocs+63)/64)
	n := uint64(0)
	var ids segment.TermDictionary
	it, err := fst.Iterator(nil, nil)
	for err == nil {
		term, val := it.Current()
		var doc uint64
		if val&zap.FSTValEncodingMask == zap.FSTValEncoding1Hit {
			doc, _ = zap.FSTValDecode1Hit(val)
		} else {
			// Segments built in memory, and files persisted from them, keep even a
			// one-document postings list apart; merged ones inline it.
			if ids == nil {
				if ids, err = seg.Dictionary("_id"); err != nil {
					return nil, err
				}
			}
			if doc, err = onlyDoc(ids, term); err != nil {
				return nil, err
			}
		}
		if doc >= in.numDocs || seen[doc/64]&(1<<(doc%64)) != 0 {
			return nil, errSegmentUnsupported
		}
		seen[doc/64] |= 1 << (doc % 64)
		ts, id, ok := parseDocID(term)
		if !ok {
			return nil, fmt.Errorf("search: document %d has id %q", doc, term)
		}
		keys[doc] = docKey{ts, id}
		n++
		err = it.Next()
	}
	if !errors.Is(err, vellum.ErrIteratorDone) {
		return nil, err
	}
	if n != in.numDocs {
		return nil, errSegmentUnsupported
	}
	return keys, nil
}

// onlyDoc returns the document of a term with one, or errSegmentUnsupported.
func onlyDoc(d segment.TermDictionary, term []byte) (uint64, error) {
	pl, err := d.PostingsList(term, nil, nil)
	if err != nil {
		return 0, err
	}
	if pl.Count() != 1 {
		return 0, errSegmentUnsupported
	}
	p, err := pl.Iterator(false, false, false, nil).Next()
	if err != nil {
		return 0, err
	}
	if p == nil {
		return 0, errSegmentUnsupported
	}
	return p.Number(), nil
}

// keysFromStored reads the keys from each document's stored id.
func keysFromStored(seg segment.Segment) ([]docKey, error) {
	keys := make([]docKey, seg.Count())
	for i := range keys {
		id, err := seg.DocID(uint64(i))
		if err != nil {
			return nil, err
		}
		ts, mid, ok := parseDocID(id)
		if !ok {
			return nil, fmt.Errorf("search: document %d has id %q", i, id)
		}
		keys[i] = docKey{ts, mid}
	}
	return keys, nil
}
