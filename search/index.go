// Package search is the full-text index of messages: the bleve mapping, the batch
// indexer that follows the store's durable index queue, and the query language. It is a
// leaf: it knows nothing of the store but what a Source gives it, and nothing outside it
// knows the index is bleve.
package search

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/blevesearch/bleve/v2"
	_ "github.com/blevesearch/bleve/v2/analysis/analyzer/keyword" // the mapping's keyword fields
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
)

// Caps on what of a message is indexed (API-NOTES section 7).
const (
	MaxSubject = 4096
	MaxFrom    = 4096
	MaxTo      = 8192
	MaxBody    = 128 << 10
)

// Version is the layout of documents and mapping, and the segment plugin. An index of
// another version is rebuilt. (6: segments of our plugin under its own name, where 5's
// were recorded as zapx's.)
const Version = "6"

// Field names in the index.
const (
	fSubject = "s"   // subject: weight A
	fFrom    = "f"   // from address and name: weight B
	fTo      = "t"   // to and cc addresses and names: weight B
	fBody    = "b"   // plain-text body and attachment filenames: weight C
	fPairs   = "bp"  // the body's pair filter (bloom.go), stored, not indexed
	fInbox   = "in"  // inbox row id (keyword)
	fCat     = "cat" // triage filters (keywords, complete results only)
	fReply   = "nr"
	fUrgency = "urg"
	fHas     = "has" // "attachment"
	fDay     = "day" // UTC day as days since the epoch, six digits (keyword, for before:/after:)
)

// Boosts of the weight classes: a subject hit outranks an address hit, which outranks a
// body hit.
const (
	boostSubject = 8.0
	boostAddress = 3.0
	boostBody    = 1.0
)

// Internal keys bleve keeps with the segments, so they are persisted atomically with the
// documents they describe.
var (
	keySeq     = []byte("inboxd.seq")     // last applied queue sequence number
	keyStore   = []byte("inboxd.store")   // identity of the store the index follows
	keyVersion = []byte("inboxd.version") // Version
)

// Doc is what the index holds of one message. Nothing of it is stored in the index but
// what identifies the row (ID and TS) and the body's pair filter; the rest is indexed only.
type Doc struct {
	ID          int64 // message row id
	Inbox       int64 // inbox row id
	TS          int64 // milliseconds since the epoch
	Subject     string
	From        string   // "Name <addr>" or addr
	To          []string // to and cc
	Body        string   // plain text
	Attachments []string // filenames
	// Complete triage results, "" when absent (API-NOTES section 8).
	Category, NeedsReply, Urgency string
	// TriagePending: the message waits for triage, whose result changes this document
	// (the indexer holds such fresh mail back for a tick, to index it once).
	TriagePending bool
}

// day is the UTC day of a timestamp in ms, as days since the epoch.
func day(ms int64) int64 {
	d := ms / 86400000
	if ms < 0 && ms%86400000 != 0 {
		d--
	}
	return d
}

// dayTerm is the index term of a day: six digits, so terms sort as days do. Days before
// 1970 or after the year 4707 are clamped.
func dayTerm(d int64) string {
	d = min(max(d, 0), 999999)
	b := []byte("000000")
	for i := 5; i >= 0 && d > 0; i-- {
		b[i] = byte('0' + d%10)
		d /= 10
	}
	return string(b)
}

// docID is the index id of a message: its timestamp and row id, fixed width so that it
// carries the tie-breaking sort key of a hit without a lookup.
func docID(ts, id int64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(ts)^(1<<63))
	binary.BigEndian.PutUint64(b[8:], uint64(id))
	return hex.EncodeToString(b[:])
}

func parseDocID(s []byte) (ts, id int64, ok bool) {
	var b [16]byte
	if len(s) != 32 {
		return 0, 0, false
	}
	if _, err := hex.Decode(b[:], s); err != nil {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(b[:8]) ^ (1 << 63)), int64(binary.BigEndian.Uint64(b[8:])), true
}

// Index is the bleve index of all inboxes' messages. bleve keeps the segments on disk,
// merges them and makes batches atomic; queries are answered by this package straight
// from the segments' postings (eval.go).
type Index struct {
	b    bleve.Index
	path string
	keys keyCache
	an   *docAnalysis
	// scores holds the score slices of rankSegment, one per search at a time.
	scores sync.Pool
}

// newMapping describes the documents for bleve's index metadata: every field named,
// nothing dynamic, nothing stored but the pair filter. Documents are built by document,
// not through the mapping.
func newMapping() *mapping.IndexMappingImpl {
	text := func(vectors bool) *mapping.FieldMapping {
		f := mapping.NewTextFieldMapping()
		f.Analyzer = AnalyzerName
		f.Store = false
		f.IncludeInAll = false
		f.DocValues = false
		f.IncludeTermVectors = vectors
		return f
	}
	kw := func() *mapping.FieldMapping {
		f := mapping.NewKeywordFieldMapping()
		f.Store = false
		f.IncludeInAll = false
		f.DocValues = false
		f.IncludeTermVectors = false
		f.SkipFreqNorm = true
		return f
	}
	dm := mapping.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fSubject, text(true))
	dm.AddFieldMappingsAt(fFrom, text(true))
	dm.AddFieldMappingsAt(fTo, text(true))
	body := text(false)
	body.SkipFreqNorm = true
	dm.AddFieldMappingsAt(fBody, body)
	pairs := mapping.NewTextFieldMapping()
	pairs.Index, pairs.Store, pairs.IncludeInAll, pairs.DocValues = false, true, false, false
	dm.AddFieldMappingsAt(fPairs, pairs)
	for _, f := range []string{fInbox, fCat, fReply, fUrgency, fHas, fDay} {
		dm.AddFieldMappingsAt(f, kw())
	}
	m := mapping.NewIndexMapping()
	m.DefaultMapping = dm
	m.DefaultAnalyzer = AnalyzerName
	m.StoreDynamic = false
	m.IndexDynamic = false
	m.DocValuesDynamic = false
	return m
}

// document builds the bleve document of d.
func (d *Doc) document(an *docAnalysis) *document.Document {
	doc := document.NewDocument(docID(d.TS, d.ID))
	add := func(name string, kind fieldKind, opts index.FieldIndexingOptions, v string) *field {
		if v == "" {
			return nil
		}
		f := &field{name: name, kind: kind, opts: opts, text: v, an: an}
		doc.AddField(f)
		return f
	}
	texts := fieldTexts(d)
	add(fSubject, kindText, optText, texts[fSubject])
	add(fFrom, kindText, optText, texts[fFrom])
	add(fTo, kindText, optText, texts[fTo])
	if body := add(fBody, kindBody, optBody, texts[fBody]); body != nil {
		body.pairs = &field{name: fPairs, kind: kindStored, opts: optStored}
		doc.AddField(body.pairs)
	}
	add(fInbox, kindKeyword, optKeyword, strconv.FormatInt(d.Inbox, 10))
	add(fCat, kindKeyword, optKeyword, d.Category)
	add(fReply, kindKeyword, optKeyword, d.NeedsReply)
	add(fUrgency, kindKeyword, optKeyword, d.Urgency)
	if len(d.Attachments) > 0 {
		add(fHas, kindKeyword, optKeyword, "attachment")
	}
	// Days, not milliseconds: dates are what before:/after: compare, and a value per
	// message would be a term per message.
	add(fDay, kindKeyword, optKeyword, dayTerm(day(d.TS)))
	return doc
}

func joinCapped(parts []string, max int) string {
	n := 0
	for i, p := range parts {
		if n+len(p)+2 > max {
			parts = parts[:i]
			break
		}
		n += len(p) + 2
	}
	var out []byte
	for i, p := range parts {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = append(out, p...)
	}
	return string(out)
}

// capString cuts s to at most max bytes, on a rune boundary.
func capString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && max < len(s) && s[max]&0xC0 == 0x80 {
		max--
	}
	return s[:max]
}

// scorchConfig is the configuration of bleve's index, with segments of the plugin
// registered as segType (segPluginType; zapx's "zap" for a test's reference index).
func scorchConfig(segType string) map[string]interface{} {
	return map[string]interface{}{
		// Batches return once applied in memory; persistence is tracked per batch with
		// a callback, and the queue is trimmed only behind it.
		"unsafe_batch": true,
		"bolt_timeout": "2s",
		// Our segment plugin (segment_plugin.go), by name: new segments built and merged
		// by our writer (segment.go, segment_merge.go), read by zapx v17. Both of
		// scorch's merges go through the plugin: the persister's of the segments still
		// in memory and the merger's of files (most of the merging under a stream of
		// mail: BENCHMARKS.md, "The house").
		"forceSegmentType":    segType,
		"forceSegmentVersion": 17,
		// No merge makes a segment of more than 100,000 documents, and one of 50,000
		// live documents or more is merged no more (bleve's planner; the rest of its
		// defaults stand). Uncapped, the top tier eventually merges the whole index
		// again: on the bench's 200,000 messages a 314 MB segment was rewritten while
		// mail arrived, taking a core for seconds, and ingest measured 1,384-1,556
		// msg/s instead of 1,650 (BENCHMARKS.md, "Whole server: what limits it").
		// The cost is more segments for a search to visit on a large index.
		"scorchMergePlanOptions": map[string]interface{}{"MaxSegmentSize": 100000},
	}
}

// ErrCorrupt means the index directory exists but cannot be used; rebuild it.
var ErrCorrupt = errors.New("search: index is unusable")

// ErrInUse means another process (a running server) has the index open.
var ErrInUse = errors.New("search: the index is in use by another process")

// Meta describes what an index holds.
type Meta struct {
	Seq     int64  // last applied queue sequence number
	Store   string // identity of the store it follows
	Version string
}

// Open opens the index at path. A missing index is created empty (Meta.Version is then
// ""); an unreadable one returns ErrCorrupt.
func Open(path string) (*Index, Meta, error) { return openWith(path, segPluginType) }

// openWith is Open with new segments of the plugin registered as segType. (An existing
// index is opened with the plugin it records.)
func openWith(path, segType string) (*Index, Meta, error) {
	m := newMapping()
	cfg := scorchConfig(segType)
	var b bleve.Index
	var err error
	if _, statErr := os.Stat(path); errors.Is(statErr, os.ErrNotExist) {
		b, err = bleve.NewUsing(path, m, bleve.Config.DefaultIndexType, bleve.Config.DefaultKVStore, cfg)
		if err != nil {
			return nil, Meta{}, fmt.Errorf("search: create %s: %w", path, err)
		}
	} else {
		b, err = bleve.OpenUsing(path, cfg)
		if err != nil {
			if isLocked(err) {
				return nil, Meta{}, fmt.Errorf("%w: %s: %v", ErrInUse, path, err)
			}
			return nil, Meta{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
		}
	}
	ix := &Index{b: b, path: path, an: newAnalysis()}
	ix.scores.New = func() any { return new([]float64) }
	meta, err := ix.meta()
	if err != nil {
		b.Close()
		return nil, Meta{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return ix, meta, nil
}

func isLocked(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || err.Error() == "timeout")
}

func (ix *Index) meta() (Meta, error) {
	var m Meta
	seq, err := ix.b.GetInternal(keySeq)
	if err != nil {
		return m, err
	}
	if len(seq) == 8 {
		m.Seq = int64(binary.BigEndian.Uint64(seq))
	}
	st, err := ix.b.GetInternal(keyStore)
	if err != nil {
		return m, err
	}
	v, err := ix.b.GetInternal(keyVersion)
	if err != nil {
		return m, err
	}
	m.Store, m.Version = string(st), string(v)
	return m, nil
}

// Close closes the index; batches already applied are persisted first.
func (ix *Index) Close() error {
	return ix.b.Close()
}

// Path is the directory of the index.
func (ix *Index) Path() string { return ix.path }

// DocCount is the number of messages in the index.
func (ix *Index) DocCount() (uint64, error) { return ix.b.DocCount() }

// Batch collects changes to apply together.
type Batch struct {
	b   *bleve.Batch
	ix  *Index
	n   int
	err error
}

// NewBatch starts a batch.
func (ix *Index) NewBatch() *Batch { return &Batch{b: ix.b.NewBatch(), ix: ix} }

// Put indexes d, replacing what the index held for it.
func (bt *Batch) Put(d *Doc) {
	if err := bt.b.IndexAdvanced(d.document(bt.ix.an)); err != nil && bt.err == nil {
		bt.err = err
	}
	bt.n++
}

// Delete removes the message with that timestamp and row id.
func (bt *Batch) Delete(ts, id int64) {
	bt.b.Delete(docID(ts, id))
	bt.n++
}

// Len is the number of changes in the batch.
func (bt *Batch) Len() int { return bt.n }

// Apply applies the batch and records seq and the store identity with it. persisted, if
// not nil, is called once the batch is on disk.
func (ix *Index) Apply(bt *Batch, seq int64, store string, persisted func(error)) error {
	if bt.err != nil {
		return bt.err
	}
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], uint64(seq))
	bt.b.SetInternal(keySeq, s[:])
	bt.b.SetInternal(keyStore, []byte(store))
	bt.b.SetInternal(keyVersion, []byte(Version))
	if persisted != nil {
		var once sync.Once
		bt.b.SetPersistedCallback(func(err error) { once.Do(func() { persisted(err) }) })
	}
	return ix.b.Batch(bt.b)
}

// persistFailures returns how many times bleve failed to write the index's segments to
// disk. It tries again by itself, as often as it can, and a batch's persisted callback
// waits for it: on a full disk, for as long as the disk stays full.
func (ix *Index) persistFailures() uint64 {
	adv, err := ix.b.Advanced()
	if err != nil {
		return 0
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return 0
	}
	st, ok := sc.Stats().(*scorch.Stats)
	if !ok {
		return 0
	}
	return atomic.LoadUint64(&st.TotPersistLoopErr)
}
