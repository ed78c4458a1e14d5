package search

import (
	"container/heap"
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	segment "github.com/blevesearch/scorch_segment_api/v2"
)

// Queries are answered straight from the segments bleve keeps: every term's postings are
// a bitmap of document numbers, so the inbox and triage filters, AND, OR and NOT are
// bitmap operations, and scoring is a pass over the bitmaps of the query's terms. A
// message's score depends only on which of the query's clauses match it in which field
// (no term frequencies or lengths), so the best page of a query that matches half an
// inbox is found by one pass over its hits with a small heap, and no hit but those of the
// page is ever looked up. (bleve's own searchers score hit by hit through several layers
// of interfaces; that was 0.4 µs per hit, 15-40 ms for a common word at 100,000 messages.)
//
// Relevance: for each word or phrase of the query and each field it matches in, the
// message gets the field's boost (subject 8, from and to 3, body 1) times the term's
// inverse document frequency in that field (1 + ln(N/(df+1)); a phrase counts the sum of
// its words'). A word counts once per field however often it occurs. Messages of equal
// score come newest first, then by row id.

// docKey is the sort key a segment's document number stands for.
type docKey struct{ ts, id int64 }

// keyCache holds the keys of each segment's documents, read once per segment (segments
// never change; merged ones are new segments).
type keyCache struct {
	mu sync.Mutex
	m  map[segment.Segment][]docKey
}

func (c *keyCache) get(seg segment.Segment) ([]docKey, error) {
	c.mu.Lock()
	v, ok := c.m[seg]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := segmentKeys(seg)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[segment.Segment][]docKey{}
	}
	c.m[seg] = v
	c.mu.Unlock()
	return v, nil
}

// prune forgets the segments a snapshot no longer has.
func (c *keyCache) prune(live map[segment.Segment]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for seg := range c.m {
		if !live[seg] {
			delete(c.m, seg)
		}
	}
}

// segmentKeys returns the keys of seg's documents by document number, from their ids.
func segmentKeys(seg segment.Segment) ([]docKey, error) {
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

// segView is one segment of a snapshot as a query sees it.
type segView struct {
	ix      *Index
	seg     segment.Segment
	deleted *roaring.Bitmap
	keys    []docKey
	dicts   map[string]segment.TermDictionary
}

func (v *segView) key(doc uint32) (docKey, error) {
	if v.keys == nil {
		keys, err := v.ix.keys.get(v.seg)
		if err != nil {
			return docKey{}, err
		}
		v.keys = keys
	}
	return v.keys[doc], nil
}

func (v *segView) dict(field string) (segment.TermDictionary, error) {
	if d, ok := v.dicts[field]; ok {
		return d, nil
	}
	d, err := v.seg.Dictionary(field)
	if err != nil {
		return nil, err
	}
	v.dicts[field] = d
	return d, nil
}

var emptyBitmap = roaring.New()

// postings returns the live documents holding term in field. The bitmap may be the
// segment's own: never modify it.
func (v *segView) postings(field, term string) (*roaring.Bitmap, error) {
	d, err := v.dict(field)
	if err != nil || d == nil {
		return emptyBitmap, err
	}
	pl, err := d.PostingsList([]byte(term), v.deleted, nil)
	if err != nil {
		return nil, err
	}
	it := pl.Iterator(false, false, false, nil)
	if o, ok := it.(segment.OptimizablePostingsIterator); ok {
		if bm := o.ActualBitmap(); bm != nil {
			return bm, nil
		}
		if n, ok := o.DocNum1Hit(); ok {
			return roaring.BitmapOf(uint32(n)), nil
		}
		return emptyBitmap, nil
	}
	bm := roaring.New()
	for {
		p, err := it.Next()
		if err != nil {
			return nil, err
		}
		if p == nil {
			return bm, nil
		}
		bm.Add(uint32(p.Number()))
	}
}

// phrase returns the documents of cand that hold terms at consecutive positions in field
// (a field indexed with positions).
func (v *segView) phrase(field string, terms []string, cand *roaring.Bitmap) (*roaring.Bitmap, error) {
	out := roaring.New()
	if cand.IsEmpty() {
		return out, nil
	}
	d, err := v.dict(field)
	if err != nil || d == nil {
		return out, err
	}
	its := make([]segment.PostingsIterator, len(terms))
	for i, t := range terms {
		pl, err := d.PostingsList([]byte(t), v.deleted, nil)
		if err != nil {
			return nil, err
		}
		its[i] = pl.Iterator(true, true, true, nil)
	}
	pos := make([][]uint64, len(terms))
	it := cand.Iterator()
next:
	for it.HasNext() {
		doc := uint64(it.Next())
		for i := range its {
			p, err := its[i].Advance(doc)
			if err != nil {
				return nil, err
			}
			if p == nil || p.Number() != doc {
				continue next
			}
			pos[i] = pos[i][:0]
			for _, l := range p.Locations() {
				pos[i] = append(pos[i], l.Pos())
			}
		}
	start:
		for _, p0 := range pos[0] {
			for i := 1; i < len(pos); i++ {
				found := false
				for _, p := range pos[i] {
					if p == p0+uint64(i) {
						found = true
						break
					}
				}
				if !found {
					continue start
				}
			}
			out.Add(uint32(doc))
			continue next
		}
	}
	return out, nil
}

// dayRange returns the documents of a day range [from, to) of day terms; "" is open.
func (v *segView) dayRange(from, to string) (*roaring.Bitmap, error) {
	d, err := v.dict(fDay)
	if err != nil || d == nil {
		return emptyBitmap, err
	}
	var end []byte
	if to != "" {
		end = []byte(to)
	}
	it := d.AutomatonIterator(nil, []byte(from), end)
	var bms []*roaring.Bitmap
	for {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		bm, err := v.postings(fDay, e.Term)
		if err != nil {
			return nil, err
		}
		bms = append(bms, bm)
	}
	return roaring.FastOr(bms...), nil
}

// snapshot is a consistent view of the index for one query.
type snapshot struct {
	close func() error
	segs  []*segView
	docs  uint64 // live documents
}

func (ix *Index) snapshot() (*snapshot, error) {
	adv, err := ix.b.Advanced()
	if err != nil {
		return nil, err
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, err
	}
	is, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		r.Close()
		return nil, fmt.Errorf("search: unexpected index reader %T", r)
	}
	s := &snapshot{close: r.Close}
	live := map[segment.Segment]bool{}
	for _, ss := range is.Segments() {
		seg := ss.Segment()
		live[seg] = true
		n := seg.Count()
		del := ss.Deleted()
		if del != nil {
			n -= min(n, del.GetCardinality())
		}
		if n == 0 {
			continue
		}
		s.docs += n
		s.segs = append(s.segs, &segView{ix: ix, seg: seg, deleted: del, dicts: map[string]segment.TermDictionary{}})
	}
	ix.keys.prune(live)
	return s, nil
}

// warm reads the document keys of every segment, so the first searches do not.
func (ix *Index) warm() {
	s, err := ix.snapshot()
	if err != nil {
		return
	}
	defer s.close()
	for _, v := range s.segs {
		if _, err := v.key(0); err != nil {
			return
		}
	}
}

// InboxDocs returns the ids (timestamp, row id) of every message of an inbox in the index.
func (ix *Index) InboxDocs(ctx context.Context, inbox int64) ([][2]int64, error) {
	s, err := ix.snapshot()
	if err != nil {
		return nil, err
	}
	defer s.close()
	var out [][2]int64
	for _, v := range s.segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bm, err := v.postings(fInbox, strconv.FormatInt(inbox, 10))
		if err != nil {
			return nil, err
		}
		for it := bm.Iterator(); it.HasNext(); {
			k, err := v.key(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, [2]int64{k.ts, k.id})
		}
	}
	return out, nil
}

// textFields are the fields a word without a field operator is looked for in.
var textFields = []string{fSubject, fFrom, fTo, fBody}

// clauseFields are the fields a clause's words are looked for in (none but for words).
func clauseFields(c clause) []string {
	if c.kind != kWords {
		return nil
	}
	if c.field != "" {
		return []string{c.field}
	}
	return textFields
}

func boost(field string) float64 {
	switch field {
	case fSubject:
		return boostSubject
	case fBody:
		return boostBody
	}
	return boostAddress
}

// segClause is one clause evaluated on one segment.
type segClause struct {
	exact []*roaring.Bitmap // per field of the clause: documents where it surely matches
	any   *roaring.Bitmap   // union of exact
	maybe *roaring.Bitmap   // body phrase candidates, not yet checked (nil if none)
}

// Confirm loads messages to check body phrases against their text; a message it leaves
// out no longer matches. nil trusts the pair filters.
type Confirm func(ctx context.Context, ids []int64) ([]Doc, error)

// evalHit is a hit with where it came from, for checking it later.
type evalHit struct {
	Hit
	seg      int
	doc      uint32
	filtered bool   // its pair filter was read
	inBody   uint32 // the phrase clauses its pair filter lets through
	checked  bool   // score and match are final
}

// pendingHeap is a max-heap in result order.
type pendingHeap []evalHit

func (h pendingHeap) Len() int           { return len(h) }
func (h pendingHeap) Less(i, j int) bool { return h[i].Hit.before(h[j].Hit) }
func (h pendingHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)        { *h = append(*h, x.(evalHit)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

var scorePool = sync.Pool{New: func() any { return new([]float64) }}

// search answers one page: up to k hits in result order after req.After.
func (ix *Index) search(ctx context.Context, req Request, k int, confirm Confirm, t *tail) ([]Hit, error) {
	s, err := ix.snapshot()
	if err != nil {
		return nil, err
	}
	defer s.close()

	// Flatten the clauses; a group is a range of them.
	var cls []clause
	var groups [][2]int
	for _, g := range req.Query.groups {
		groups = append(groups, [2]int{len(cls), len(cls) + len(g)})
		cls = append(cls, g...)
	}

	// Pass 1: the bitmaps of every clause in every segment, and document frequencies.
	df := map[[2]string]uint64{}
	per := make([][]segClause, len(s.segs))
	bases := make([]*roaring.Bitmap, len(s.segs))
	for si, v := range s.segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		base, err := v.postings(fInbox, strconv.FormatInt(req.Inbox, 10))
		if err != nil {
			return nil, err
		}
		for _, f := range [][2]string{{fCat, req.Filter.Category}, {fReply, req.Filter.NeedsReply}, {fUrgency, req.Filter.Urgency}} {
			if f[1] != "" {
				bm, err := v.postings(f[0], f[1])
				if err != nil {
					return nil, err
				}
				base = roaring.And(base, bm)
			}
		}
		bases[si] = base
		seen := map[[2]string]*roaring.Bitmap{}
		termBM := func(f, t string) (*roaring.Bitmap, error) {
			if bm, ok := seen[[2]string{f, t}]; ok {
				return bm, nil
			}
			bm, err := v.postings(f, t)
			if err != nil {
				return nil, err
			}
			seen[[2]string{f, t}] = bm
			df[[2]string{f, t}] += bm.GetCardinality()
			return bm, nil
		}
		per[si] = make([]segClause, len(cls))
		for ci, c := range cls {
			sc := &per[si][ci]
			switch c.kind {
			case kHas:
				bm, err := v.postings(fHas, "attachment")
				if err != nil {
					return nil, err
				}
				sc.any = roaring.And(bm, base)
			case kBefore, kAfter:
				var bm *roaring.Bitmap
				if c.kind == kBefore {
					bm, err = v.dayRange("", dayTerm(day(c.ms)))
				} else {
					bm, err = v.dayRange(dayTerm(day(c.ms)), "")
				}
				if err != nil {
					return nil, err
				}
				sc.any = roaring.And(bm, base)
			default:
				fields := clauseFields(c)
				sc.exact = make([]*roaring.Bitmap, len(fields))
				for fi, f := range fields {
					cand := base
					for _, t := range c.terms {
						bm, err := termBM(f, t)
						if err != nil {
							return nil, err
						}
						cand = roaring.And(cand, bm)
					}
					switch {
					case len(c.terms) == 1:
						sc.exact[fi] = cand
					case f == fBody:
						pairs := phrasePairs(c.terms)
						for _, p := range pairs {
							bm, err := termBM(f, p)
							if err != nil {
								return nil, err
							}
							cand = roaring.And(cand, bm)
						}
						if len(c.terms) == 2 && len(pairs) == 1 {
							// Two common words: the pair term is the phrase.
							sc.exact[fi] = cand
						} else {
							sc.exact[fi] = emptyBitmap
							sc.maybe = cand
						}
					default:
						if sc.exact[fi], err = v.phrase(f, c.terms, cand); err != nil {
							return nil, err
						}
					}
				}
				sc.any = roaring.FastOr(sc.exact...)
			}
		}
	}

	// The weight of each (clause, field) match.
	tailDocs, tailN := t.frequencies(cls, df)
	docs := s.docs + tailN
	weights := make([][]float64, len(cls))
	for ci, c := range cls {
		if c.not || c.kind != kWords {
			continue
		}
		for _, f := range clauseFields(c) {
			w := 0.0
			for _, t := range c.terms {
				w += 1 + math.Log(float64(docs)/float64(df[[2]string{f, t}]+1))
			}
			weights[ci] = append(weights[ci], boost(f)*w)
		}
	}

	// Pass 2: per segment, the documents that match (or may), their scores, the best k
	// settled ones and every one still to be checked.
	top := &hitHeap{}
	var pending pendingHeap
	after := req.After
	consider := func(h Hit) {
		if after != nil && !after.before(h) {
			return
		}
		if len(*top) < k {
			heap.Push(top, h)
		} else if h.before((*top)[0]) {
			(*top)[0] = h
			heap.Fix(top, 0)
		}
	}
	tailHits(tailDocs, req, weights, consider)
	for si, v := range s.segs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		scs := per[si]
		result := bases[si]
		var maybes []*roaring.Bitmap
		for _, g := range groups {
			var alts []*roaring.Bitmap
			for ci := g[0]; ci < g[1]; ci++ {
				sc := scs[ci]
				if sc.maybe != nil {
					maybes = append(maybes, sc.maybe)
				}
				if cls[ci].not {
					alts = append(alts, roaring.AndNot(bases[si], sc.any))
				} else if sc.maybe != nil {
					alts = append(alts, roaring.Or(sc.any, sc.maybe))
				} else {
					alts = append(alts, sc.any)
				}
			}
			result = roaring.And(result, roaring.FastOr(alts...))
		}
		if result.IsEmpty() {
			continue
		}
		unsure := roaring.And(result, roaring.FastOr(maybes...))

		// Scores: exact for settled documents, an upper bound for unsure ones.
		n := int(v.seg.Count())
		sp := scorePool.Get().(*[]float64)
		if cap(*sp) < n {
			*sp = make([]float64, n)
		}
		scores := (*sp)[:n]
		clear(scores)
		for ci := range cls {
			if weights[ci] == nil {
				continue
			}
			for fi, bm := range scs[ci].exact {
				addScores(scores, bm, weights[ci][fi])
			}
			if scs[ci].maybe != nil {
				addScores(scores, scs[ci].maybe, weights[ci][len(weights[ci])-1])
			}
		}
		var keyErr error
		visit := func(bm *roaring.Bitmap, fn func(doc uint32, sc float64)) {
			it := bm.ManyIterator()
			buf := make([]uint32, 256)
			for {
				m := it.NextMany(buf)
				if m == 0 {
					return
				}
				for _, doc := range buf[:m] {
					fn(doc, scores[doc])
				}
			}
		}
		visit(roaring.AndNot(result, unsure), func(doc uint32, sc float64) {
			if keyErr != nil {
				return
			}
			// Cheap rejections on the score alone: most hits of a common word never need
			// their key.
			if after != nil && sc > after.Score {
				return
			}
			if len(*top) == k && sc < (*top)[0].Score {
				return
			}
			key, err := v.key(doc)
			if err != nil {
				keyErr = err
				return
			}
			if !t.hides(key.id) {
				consider(Hit{ID: key.id, TS: key.ts, Score: sc})
			}
		})
		visit(unsure, func(doc uint32, sc float64) {
			if keyErr != nil {
				return
			}
			key, err := v.key(doc)
			if err != nil {
				keyErr = err
				return
			}
			if t.hides(key.id) {
				return
			}
			pending = append(pending, evalHit{Hit: Hit{ID: key.id, TS: key.ts, Score: sc}, seg: si, doc: doc})
		})
		scorePool.Put(sp)
		if keyErr != nil {
			return nil, keyErr
		}
	}

	settled := make([]Hit, len(*top))
	for i := len(settled) - 1; i >= 0; i-- {
		settled[i] = heap.Pop(top).(Hit)
	}
	if len(pending) == 0 {
		return settled, nil
	}

	// Merge the settled hits with the unsure ones, checking unsure hits when they are the
	// best left (their checked score is at most the bound they were ranked by): first
	// against their pair filters, a run of the best at a time, then those the filters let
	// through against their text, again several at once.
	ck := &checker{ix: ix, s: s, per: per, cls: cls, groups: groups, weights: weights, confirm: confirm}
	ck.hashes = make([][]uint64, len(cls))
	for ci, c := range cls {
		if c.kind == kWords && len(c.terms) > 1 {
			ck.hashes[ci] = phraseHashes(c.terms)
		}
	}
	keep := func(h *evalHit) bool { return after == nil || after.before(h.Hit) }
	heap.Init(&pending)
	out := make([]Hit, 0, k)
	for len(out) < k && (len(settled) > 0 || len(pending) > 0) {
		if len(pending) == 0 || (len(settled) > 0 && settled[0].before(pending[0].Hit)) {
			out = append(out, settled[0])
			settled = settled[1:]
			continue
		}
		h := &pending[0]
		if h.checked {
			out = append(out, h.Hit)
			heap.Pop(&pending)
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if h.filtered {
			// Confirm the filtered hits at the top against their text, several at once.
			var batch []evalHit
			for len(pending) > 0 && len(batch) < min(64, max(8, k-len(out))) {
				top := pending[0]
				if top.checked || !top.filtered || (len(settled) > 0 && settled[0].before(top.Hit)) {
					break
				}
				batch = append(batch, heap.Pop(&pending).(evalHit))
			}
			if err := ck.confirmText(ctx, batch); err != nil {
				return nil, err
			}
			for i := range batch {
				if batch[i].checked && keep(&batch[i]) {
					heap.Push(&pending, batch[i])
				}
			}
			continue
		}
		// Filter the unfiltered hits at the top, a run at a time.
		var run []evalHit
		for len(pending) > 0 && len(run) < 256 {
			top := pending[0]
			if top.filtered || top.checked || (len(settled) > 0 && settled[0].before(top.Hit)) {
				break
			}
			run = append(run, heap.Pop(&pending).(evalHit))
		}
		// In document order: the filters are read from the segments' stored data.
		sort.Slice(run, func(i, j int) bool {
			return run[i].seg < run[j].seg || run[i].seg == run[j].seg && run[i].doc < run[j].doc
		})
		for i := range run {
			ok, err := ck.filter(&run[i])
			if err != nil {
				return nil, err
			}
			// An unchecked score is an upper bound: only a final one can be before the
			// cursor.
			if ok && (!run[i].checked || keep(&run[i])) {
				heap.Push(&pending, run[i])
			}
		}
	}
	return out, nil
}

func addScores(scores []float64, bm *roaring.Bitmap, w float64) {
	if bm == nil || w == 0 {
		return
	}
	it := bm.ManyIterator()
	var buf [256]uint32
	for {
		m := it.NextMany(buf[:])
		if m == 0 {
			return
		}
		for _, doc := range buf[:m] {
			scores[doc] += w
		}
	}
}

// checker settles unsure hits: first against the pair filters, then against the text.
type checker struct {
	ix      *Index
	s       *snapshot
	per     [][]segClause
	cls     []clause
	groups  [][2]int
	weights [][]float64
	hashes  [][]uint64 // pair hashes of the phrase clauses
	confirm Confirm
}

// filter checks h's body phrases against its pair filter and rescores it: a phrase the
// filter rules out is not in the body; one it lets through is taken as there until
// confirmText. It reports whether h may still match.
func (ck *checker) filter(h *evalHit) (bool, error) {
	v, scs := ck.s.segs[h.seg], ck.per[h.seg]
	var found uint32
	err := v.seg.VisitStoredFields(uint64(h.doc), func(field string, _ byte, f []byte, _ []uint64) bool {
		if field != fPairs {
			return true
		}
		for ci, sc := range scs {
			if sc.maybe != nil && sc.maybe.Contains(h.doc) && bloomAll(f, ck.hashes[ci]) {
				found |= 1 << ci
			}
		}
		return false
	})
	if err != nil {
		return false, err
	}
	h.filtered, h.inBody = true, found
	h.checked = found == 0 || ck.confirm == nil
	return ck.rescore(h, h.checked), nil
}

// confirmText checks the phrases the pair filters let through against the messages'
// text. A hit left unchecked no longer matches.
func (ck *checker) confirmText(ctx context.Context, hits []evalHit) error {
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	docs, err := ck.confirm(ctx, ids)
	if err != nil {
		return err
	}
	byID := make(map[int64]*Doc, len(docs))
	for i := range docs {
		byID[docs[i].ID] = &docs[i]
	}
	for i := range hits {
		h := &hits[i]
		d, ok := byID[h.ID]
		if !ok || d.TS != h.TS {
			continue
		}
		body := fieldTexts(d)[fBody]
		for ci, c := range ck.cls {
			if h.inBody&(1<<ci) != 0 && !hasPhrase(body, c.terms) {
				h.inBody &^= 1 << ci
			}
		}
		h.checked = ck.rescore(h, true)
	}
	return nil
}

// rescore recomputes h's match and score with its body phrases as h.inBody says. Until
// final, a phrase the filter lets through is taken as there where that can only raise the
// score, and as not there where it would exclude the message: the result is an upper bound.
func (ck *checker) rescore(h *evalHit, final bool) bool {
	scs := ck.per[h.seg]
	score := 0.0
	for _, g := range ck.groups {
		matched := false
		for ci := g[0]; ci < g[1]; ci++ {
			inBody := h.inBody&(1<<ci) != 0
			m := scs[ci].any.Contains(h.doc) || inBody
			if ck.cls[ci].not {
				m = !(scs[ci].any.Contains(h.doc) || (inBody && final))
			}
			if !m {
				continue
			}
			matched = true
			if w := ck.weights[ci]; w != nil {
				for fi, bm := range scs[ci].exact {
					if bm.Contains(h.doc) {
						score += w[fi]
					}
				}
				if inBody {
					score += w[len(w)-1]
				}
			}
		}
		if !matched {
			return false
		}
	}
	h.Score = score
	return true
}
