package search

import (
	"container/heap"
	"context"
	"math"
	"sort"
	"strconv"

	"github.com/RoaringBitmap/roaring/v2"
)

// A search is evaluated in these steps (Index.search):
//
//  1. match: in each segment, the documents of the inbox that pass the filter (the base),
//     and for each clause the documents that match it in each of its fields, as bitmaps;
//     the words' document frequencies are counted on the way;
//  2. weigh: the weight of a match of each (clause, field), from those frequencies;
//  3. rank: per segment, the documents that match every group of clauses, their scores,
//     and the best k of those whose match is settled; those whose body phrase is still to
//     be checked (unsure: their score is an upper bound) are kept aside;
//  4. settle: the settled hits merged with the unsure ones, checking an unsure hit when it
//     is the best left, first against its pair filter, then against its text.

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

// evaluation is one page of a search in the making.
type evaluation struct {
	ctx     context.Context
	ix      *Index
	s       *snapshot
	req     Request
	k       int // hits wanted
	t       *tail
	confirm Confirm

	cls     []clause
	groups  [][2]int             // each group of the query, as a range of cls
	bases   []*roaring.Bitmap    // per segment: the inbox's documents that pass the filter
	per     [][]segClause        // per segment, per clause
	df      map[[2]string]uint64 // document frequency of each (field, term) read
	weights [][]float64          // per clause, per field: the weight of a match
	hashes  [][]uint64           // per clause: the pair hashes of a phrase

	top     hitHeap     // the best k settled hits
	pending pendingHeap // the unsure hits
}

// search answers one page: up to k hits in result order after req.After.
func (ix *Index) search(ctx context.Context, req Request, k int, confirm Confirm, t *tail) ([]Hit, error) {
	s, err := ix.snapshot()
	if err != nil {
		return nil, err
	}
	defer s.close()
	e := newEvaluation(ctx, ix, s, req, k, confirm, t)
	if err := e.match(); err != nil {
		return nil, err
	}
	tailDocs := e.weigh()
	tailHits(tailDocs, req, e.weights, e.consider)
	for si := range s.segs {
		if err := e.rankSegment(si); err != nil {
			return nil, err
		}
	}
	return e.settle(e.settled())
}

// newEvaluation flattens the query's clauses: a group is a range of them.
func newEvaluation(ctx context.Context, ix *Index, s *snapshot, req Request, k int, confirm Confirm, t *tail) *evaluation {
	e := &evaluation{ctx: ctx, ix: ix, s: s, req: req, k: k, t: t, confirm: confirm, df: map[[2]string]uint64{}}
	for _, g := range req.Query.groups {
		e.groups = append(e.groups, [2]int{len(e.cls), len(e.cls) + len(g)})
		e.cls = append(e.cls, g...)
	}
	e.bases = make([]*roaring.Bitmap, len(s.segs))
	e.per = make([][]segClause, len(s.segs))
	return e
}

// Step 1: match.

// match evaluates every clause in every segment.
func (e *evaluation) match() error {
	for si, v := range e.s.segs {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		base, err := e.base(v)
		if err != nil {
			return err
		}
		e.bases[si] = base
		terms := &termReader{v: v, df: e.df, seen: map[[2]string]*roaring.Bitmap{}}
		e.per[si] = make([]segClause, len(e.cls))
		for ci, c := range e.cls {
			if e.per[si][ci], err = matchClause(v, terms, base, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// base returns a segment's documents of the request's inbox that pass its filter.
func (e *evaluation) base(v *segView) (*roaring.Bitmap, error) {
	base, err := v.postings(fInbox, strconv.FormatInt(e.req.Inbox, 10))
	if err != nil {
		return nil, err
	}
	f := e.req.Filter
	for _, kw := range [][2]string{{fCat, f.Category}, {fReply, f.NeedsReply}, {fUrgency, f.Urgency}} {
		if kw[1] != "" {
			bm, err := v.postings(kw[0], kw[1])
			if err != nil {
				return nil, err
			}
			base = roaring.And(base, bm)
		}
	}
	return base, nil
}

// termReader reads a segment's postings of the query's words once each, and counts their
// document frequencies.
type termReader struct {
	v    *segView
	df   map[[2]string]uint64
	seen map[[2]string]*roaring.Bitmap
}

func (r *termReader) postings(field, term string) (*roaring.Bitmap, error) {
	key := [2]string{field, term}
	if bm, ok := r.seen[key]; ok {
		return bm, nil
	}
	bm, err := r.v.postings(field, term)
	if err != nil {
		return nil, err
	}
	r.seen[key] = bm
	r.df[key] += bm.GetCardinality()
	return bm, nil
}

// all returns the documents of cand holding every one of terms in field.
func (r *termReader) all(field string, terms []string, cand *roaring.Bitmap) (*roaring.Bitmap, error) {
	for _, t := range terms {
		bm, err := r.postings(field, t)
		if err != nil {
			return nil, err
		}
		cand = roaring.And(cand, bm)
	}
	return cand, nil
}

// matchClause evaluates one clause on one segment, within base.
func matchClause(v *segView, terms *termReader, base *roaring.Bitmap, c clause) (segClause, error) {
	var bm *roaring.Bitmap
	var err error
	switch c.kind {
	case kHas:
		bm, err = v.postings(fHas, "attachment")
	case kBefore:
		bm, err = v.dayRange("", dayTerm(day(c.ms)))
	case kAfter:
		bm, err = v.dayRange(dayTerm(day(c.ms)), "")
	default:
		return matchWords(v, terms, base, c)
	}
	if err != nil {
		return segClause{}, err
	}
	return segClause{any: roaring.And(bm, base)}, nil
}

// matchWords evaluates a clause of words (one word or a phrase) in each of its fields.
func matchWords(v *segView, terms *termReader, base *roaring.Bitmap, c clause) (segClause, error) {
	fields := clauseFields(c)
	sc := segClause{exact: make([]*roaring.Bitmap, len(fields))}
	for fi, f := range fields {
		cand, err := terms.all(f, c.terms, base)
		if err != nil {
			return sc, err
		}
		switch {
		case len(c.terms) == 1:
			sc.exact[fi] = cand
		case f == fBody:
			if sc.exact[fi], sc.maybe, err = bodyPhrase(terms, c.terms, cand); err != nil {
				return sc, err
			}
		default:
			if sc.exact[fi], err = v.phrase(f, c.terms, cand); err != nil {
				return sc, err
			}
		}
	}
	sc.any = roaring.FastOr(sc.exact...)
	return sc, nil
}

// bodyPhrase narrows the documents holding a phrase's words in the body (cand) by the
// pair terms of its common words. It returns the documents that surely hold the phrase,
// and those that may (nil if none), to be checked against their pair filters and text.
func bodyPhrase(terms *termReader, words []string, cand *roaring.Bitmap) (exact, maybe *roaring.Bitmap, err error) {
	pairs := phrasePairs(words)
	if cand, err = terms.all(fBody, pairs, cand); err != nil {
		return nil, nil, err
	}
	if len(words) == 2 && len(pairs) == 1 {
		return cand, nil, nil // two common words: the pair term is the phrase
	}
	return roaring.New(), cand, nil
}

// Step 2: weigh.

// weigh sets the weight of each (clause, field) match, counting the tail's documents
// with the index's, and returns the tail's documents with their words read.
func (e *evaluation) weigh() []*docTerms {
	tailDocs, tailN := e.t.frequencies(e.cls, e.df)
	docs := e.s.docs + tailN
	e.weights = make([][]float64, len(e.cls))
	for ci, c := range e.cls {
		if c.not || c.kind != kWords {
			continue
		}
		for _, f := range clauseFields(c) {
			w := 0.0
			for _, t := range c.terms {
				w += 1 + math.Log(float64(docs)/float64(e.df[[2]string{f, t}]+1))
			}
			e.weights[ci] = append(e.weights[ci], boost(f)*w)
		}
	}
	return tailDocs
}

// Step 3: rank.

// consider offers a settled hit for the page.
func (e *evaluation) consider(h Hit) {
	if e.req.After != nil && !e.req.After.before(h) {
		return
	}
	if len(e.top) < e.k {
		heap.Push(&e.top, h)
	} else if h.before(e.top[0]) {
		e.top[0] = h
		heap.Fix(&e.top, 0)
	}
}

// cannotEnter reports, on its score alone, that a settled hit cannot make the page: most
// hits of a common word never need their key.
func (e *evaluation) cannotEnter(score float64) bool {
	return (e.req.After != nil && score > e.req.After.Score) || (len(e.top) == e.k && score < e.top[0].Score)
}

// rankSegment ranks one segment's matches: its settled hits are considered for the page,
// its unsure ones kept for step 4.
func (e *evaluation) rankSegment(si int) error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	result, unsure := e.segmentMatches(si)
	if result.IsEmpty() {
		return nil
	}
	scores := e.segmentScores(si)
	defer e.ix.scores.Put(scores)
	v := e.s.segs[si]
	err := eachDoc(roaring.AndNot(result, unsure), func(doc uint32) error {
		sc := (*scores)[doc]
		if e.cannotEnter(sc) {
			return nil
		}
		key, err := v.key(doc)
		if err == nil && !e.t.hides(key.id) {
			e.consider(Hit{ID: key.id, TS: key.ts, Score: sc})
		}
		return err
	})
	if err != nil {
		return err
	}
	return eachDoc(unsure, func(doc uint32) error {
		key, err := v.key(doc)
		if err == nil && !e.t.hides(key.id) {
			e.pending = append(e.pending, evalHit{Hit: Hit{ID: key.id, TS: key.ts, Score: (*scores)[doc]}, seg: si, doc: doc})
		}
		return err
	})
}

// segmentMatches returns a segment's documents that match every group of clauses,
// counting a body phrase's candidates as matches, and those of them that match only if
// such a phrase is there (unsure).
func (e *evaluation) segmentMatches(si int) (result, unsure *roaring.Bitmap) {
	scs := e.per[si]
	result = e.bases[si]
	var maybes []*roaring.Bitmap
	for _, g := range e.groups {
		var alts []*roaring.Bitmap
		for ci := g[0]; ci < g[1]; ci++ {
			sc := scs[ci]
			if sc.maybe != nil {
				maybes = append(maybes, sc.maybe)
			}
			switch {
			case e.cls[ci].not:
				alts = append(alts, roaring.AndNot(e.bases[si], sc.any))
			case sc.maybe != nil:
				alts = append(alts, roaring.Or(sc.any, sc.maybe))
			default:
				alts = append(alts, sc.any)
			}
		}
		result = roaring.And(result, roaring.FastOr(alts...))
	}
	return result, roaring.And(result, roaring.FastOr(maybes...))
}

// segmentScores returns the scores of a segment's documents by document number: exact
// for settled documents, an upper bound for unsure ones. The slice goes back to
// ix.scores after use.
func (e *evaluation) segmentScores(si int) *[]float64 {
	n := int(e.s.segs[si].seg.Count())
	sp := e.ix.scores.Get().(*[]float64)
	if cap(*sp) < n {
		*sp = make([]float64, n)
	}
	*sp = (*sp)[:n]
	scores := *sp
	clear(scores)
	scs := e.per[si]
	for ci := range e.cls {
		w := e.weights[ci]
		if w == nil {
			continue
		}
		for fi, bm := range scs[ci].exact {
			addScores(scores, bm, w[fi])
		}
		if scs[ci].maybe != nil {
			addScores(scores, scs[ci].maybe, w[len(w)-1])
		}
	}
	return sp
}

// eachDoc calls fn with each document of bm in order, until fn fails.
func eachDoc(bm *roaring.Bitmap, fn func(doc uint32) error) error {
	it := bm.ManyIterator()
	var buf [256]uint32
	for {
		m := it.NextMany(buf[:])
		if m == 0 {
			return nil
		}
		for _, doc := range buf[:m] {
			if err := fn(doc); err != nil {
				return err
			}
		}
	}
}

func addScores(scores []float64, bm *roaring.Bitmap, w float64) {
	if bm == nil || w == 0 {
		return
	}
	_ = eachDoc(bm, func(doc uint32) error {
		scores[doc] += w
		return nil
	})
}

// settled returns the best settled hits in result order.
func (e *evaluation) settled() []Hit {
	out := make([]Hit, len(e.top))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&e.top).(Hit)
	}
	return out
}

// Step 4: settle.

// settle merges the settled hits with the unsure ones into the page, checking unsure hits
// when they are the best left (their checked score is at most the bound they were ranked
// by): first against their pair filters, a run of the best at a time, then those the
// filters let through against their text, again several at once.
func (e *evaluation) settle(settled []Hit) ([]Hit, error) {
	if len(e.pending) == 0 {
		return settled, nil
	}
	e.hashes = make([][]uint64, len(e.cls))
	for ci, c := range e.cls {
		if c.kind == kWords && len(c.terms) > 1 {
			e.hashes[ci] = phraseHashes(c.terms)
		}
	}
	heap.Init(&e.pending)
	out := make([]Hit, 0, e.k)
	for len(out) < e.k && (len(settled) > 0 || len(e.pending) > 0) {
		switch {
		case len(e.pending) == 0 || outranks(settled, e.pending[0]):
			out = append(out, settled[0])
			settled = settled[1:]
		case e.pending[0].checked:
			out = append(out, heap.Pop(&e.pending).(evalHit).Hit)
		default:
			if err := e.ctx.Err(); err != nil {
				return nil, err
			}
			var err error
			if e.pending[0].filtered {
				err = e.confirmTop(settled, min(64, max(8, e.k-len(out))))
			} else {
				err = e.filterTop(settled)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// outranks reports whether the best settled hit comes before h.
func outranks(settled []Hit, h evalHit) bool {
	return len(settled) > 0 && settled[0].before(h.Hit)
}

// keep reports whether a hit with a final score is after the request's cursor.
func (e *evaluation) keep(h *evalHit) bool {
	return e.req.After == nil || e.req.After.before(h.Hit)
}

// confirmTop checks up to n of the best unsure hits, those through their filters and not
// outranked by a settled one, against their text.
func (e *evaluation) confirmTop(settled []Hit, n int) error {
	var batch []evalHit
	for len(e.pending) > 0 && len(batch) < n {
		top := e.pending[0]
		if top.checked || !top.filtered || outranks(settled, top) {
			break
		}
		batch = append(batch, heap.Pop(&e.pending).(evalHit))
	}
	if err := e.confirmText(batch); err != nil {
		return err
	}
	for i := range batch {
		if batch[i].checked && e.keep(&batch[i]) {
			heap.Push(&e.pending, batch[i])
		}
	}
	return nil
}

// filterTop checks a run of the best unfiltered unsure hits against their pair filters.
func (e *evaluation) filterTop(settled []Hit) error {
	var run []evalHit
	for len(e.pending) > 0 && len(run) < 256 {
		top := e.pending[0]
		if top.filtered || top.checked || outranks(settled, top) {
			break
		}
		run = append(run, heap.Pop(&e.pending).(evalHit))
	}
	// In document order: the filters are read from the segments' stored data.
	sort.Slice(run, func(i, j int) bool {
		return run[i].seg < run[j].seg || run[i].seg == run[j].seg && run[i].doc < run[j].doc
	})
	for i := range run {
		ok, err := e.filter(&run[i])
		if err != nil {
			return err
		}
		// An unchecked score is an upper bound: only a final one can be before the cursor.
		if ok && (!run[i].checked || e.keep(&run[i])) {
			heap.Push(&e.pending, run[i])
		}
	}
	return nil
}

// filter checks h's body phrases against its pair filter and rescores it: a phrase the
// filter rules out is not in the body; one it lets through is taken as there until
// confirmText. It reports whether h may still match.
func (e *evaluation) filter(h *evalHit) (bool, error) {
	v, scs := e.s.segs[h.seg], e.per[h.seg]
	var found uint32
	err := v.seg.VisitStoredFields(uint64(h.doc), func(field string, _ byte, f []byte, _ []uint64) bool {
		if field != fPairs {
			return true
		}
		for ci, sc := range scs {
			if sc.maybe != nil && sc.maybe.Contains(h.doc) && bloomAll(f, e.hashes[ci]) {
				found |= 1 << ci
			}
		}
		return false
	})
	if err != nil {
		return false, err
	}
	h.filtered, h.inBody = true, found
	h.checked = found == 0 || e.confirm == nil
	return e.rescore(h, h.checked), nil
}

// confirmText checks the phrases the pair filters let through against the messages'
// text. A hit left unchecked no longer matches.
func (e *evaluation) confirmText(hits []evalHit) error {
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	docs, err := e.confirm(e.ctx, ids)
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
		for ci, c := range e.cls {
			if h.inBody&(1<<ci) != 0 && !hasPhrase(body, c.terms) {
				h.inBody &^= 1 << ci
			}
		}
		h.checked = e.rescore(h, true)
	}
	return nil
}

// rescore recomputes h's match and score with its body phrases as h.inBody says. Until
// final, a phrase the filter lets through is taken as there where that can only raise the
// score, and as not there where it would exclude the message: the result is an upper bound.
func (e *evaluation) rescore(h *evalHit, final bool) bool {
	scs := e.per[h.seg]
	score := 0.0
	for _, g := range e.groups {
		matched := false
		for ci := g[0]; ci < g[1]; ci++ {
			inBody := h.inBody&(1<<ci) != 0
			m := scs[ci].any.Contains(h.doc) || inBody
			if e.cls[ci].not {
				m = !(scs[ci].any.Contains(h.doc) || (inBody && final))
			}
			if !m {
				continue
			}
			matched = true
			if w := e.weights[ci]; w != nil {
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
