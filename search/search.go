package search

import (
	"container/heap"
	"context"
	"strconv"

	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Filter narrows a search like listMessages' triage filters: complete results only.
type Filter struct {
	Category   string
	NeedsReply string // yes | no | uncertain
	Urgency    string
}

// Hit is one found message: its row id, timestamp and relevance score.
type Hit struct {
	ID    int64
	TS    int64
	Score float64
}

// before reports whether h comes before o in result order: score, then timestamp, then
// id, all descending.
func (h Hit) before(o Hit) bool {
	if h.Score != o.Score {
		return h.Score > o.Score
	}
	if h.TS != o.TS {
		return h.TS > o.TS
	}
	return h.ID > o.ID
}

// Request is one page of a search in one inbox.
type Request struct {
	Inbox  int64
	Query  Query
	Filter Filter
	Limit  int
	// After is the last hit of the previous page; the page starts right after it.
	After *Hit
}

// Search returns up to Limit hits in result order and whether more follow. Hidden
// (trashed or quarantined) messages are never in the index, so they are never found.
func (ix *Index) Search(ctx context.Context, req Request) ([]Hit, bool, error) {
	if len(req.Query.groups) == 0 || req.Limit <= 0 {
		return []Hit{}, false, nil
	}
	q := ix.bleveQuery(req)
	k := req.Limit + 1
	h := &hitHeap{}
	err := ix.scanScored(ctx, q, func(score float64, key func() (int64, int64, bool)) {
		// Cheap rejections first, on the score alone: most hits of a common word never
		// need their key.
		if req.After != nil && score > req.After.Score {
			return
		}
		if len(*h) == k && score < (*h)[0].Score {
			return
		}
		ts, id, ok := key()
		if !ok {
			return
		}
		hit := Hit{ID: id, TS: ts, Score: score}
		if req.After != nil && !req.After.before(hit) {
			return
		}
		if len(*h) < k {
			heap.Push(h, hit)
		} else if hit.before((*h)[0]) {
			(*h)[0] = hit
			heap.Fix(h, 0)
		}
	})
	if err != nil {
		return nil, false, err
	}
	out := make([]Hit, len(*h))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(Hit)
	}
	more := len(out) > req.Limit
	if more {
		out = out[:req.Limit]
	}
	return out, more, nil
}

// hitHeap is a min-heap in result order: its root is the hit that would be dropped first.
type hitHeap []Hit

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return h[j].before(h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// scanScored runs q and calls fn with each hit's score and a function that decodes the
// hit's key (timestamp and row id) on demand.
func (ix *Index) scanScored(ctx context.Context, q query.Query, fn func(score float64, key func() (int64, int64, bool))) error {
	adv, err := ix.b.Advanced()
	if err != nil {
		return err
	}
	r, err := adv.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	s, err := q.Searcher(ctx, r, ix.m, bsearch.SearcherOptions{})
	if err != nil {
		return err
	}
	defer s.Close()
	sctx := &bsearch.SearchContext{DocumentMatchPool: bsearch.NewDocumentMatchPool(s.DocumentMatchPoolSize()+1, 0), IndexReader: r}
	var cur *bsearch.DocumentMatch
	var keyErr error
	key := func() (int64, int64, bool) {
		ext, err := r.ExternalID(cur.IndexInternalID)
		if err != nil {
			keyErr = err
			return 0, 0, false
		}
		return parseDocID(ext)
	}
	for n := 0; ; n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		d, err := s.Next(sctx)
		if err != nil {
			return err
		}
		if d == nil {
			return nil
		}
		cur = d
		fn(d.Score, key)
		sctx.DocumentMatchPool.Put(d)
		if keyErr != nil {
			return keyErr
		}
	}
}

// bleveQuery translates a request: the user's clauses score, the inbox and triage filters
// only filter.
func (ix *Index) bleveQuery(req Request) query.Query {
	var must, mustNot []query.Query
	filters := []query.Query{termQ(fInbox, strconv.FormatInt(req.Inbox, 10), 1)}
	for _, v := range [][2]string{{fCat, req.Filter.Category}, {fReply, req.Filter.NeedsReply}, {fUrgency, req.Filter.Urgency}} {
		if v[1] != "" {
			filters = append(filters, termQ(v[0], v[1], 1))
		}
	}
groups:
	for _, g := range req.Query.groups {
		for _, c := range g {
			// The index cannot exclude a body phrase (it holds no body positions): such a
			// group constrains nothing here, and the phrase check does the work.
			if c.not && c.bodyPhrase() {
				continue groups
			}
		}
		if len(g) == 1 {
			c := g[0]
			switch {
			case c.not:
				mustNot = append(mustNot, clauseQuery(c))
				continue
			case c.kind != kWords:
				// Date and attachment conditions of the whole query filter; they do not score.
				filters = append(filters, clauseQuery(c))
				continue
			}
			must = append(must, clauseQuery(c))
			continue
		}
		alts := make([]query.Query, 0, len(g))
		for _, c := range g {
			cq := clauseQuery(c)
			if c.not {
				// "a OR -b": documents without b; rare, and costly only when used.
				b := query.NewBooleanQuery(nil, nil, []query.Query{cq})
				b.AddMust(termQ(fInbox, strconv.FormatInt(req.Inbox, 10), 1))
				cq = b
			}
			alts = append(alts, cq)
		}
		must = append(must, query.NewDisjunctionQuery(alts))
	}
	if len(must) == 0 {
		// Only exclusions or filters: every message of the inbox scores the same, so the
		// newest come first.
		must = append(must, termQ(fInbox, strconv.FormatInt(req.Inbox, 10), 1))
	}
	b := query.NewBooleanQuery(must, nil, mustNot)
	b.AddFilter(query.NewConjunctionQuery(filters))
	return b
}

func termQ(field, term string, boost float64) query.Query {
	q := query.NewTermQuery(term)
	q.SetField(field)
	q.SetBoost(boost)
	return q
}

func phraseQ(field string, terms []string, boost float64) query.Query {
	if len(terms) == 1 {
		return termQ(field, terms[0], boost)
	}
	q := query.NewPhraseQuery(terms, field)
	q.SetBoost(boost)
	return q
}

// bodyQ matches terms in the body: a phrase becomes all of its words, which the phrase
// check then narrows (see Indexer.searchVerified).
func bodyQ(terms []string) query.Query {
	if len(terms) == 1 {
		return termQ(fBody, terms[0], boostBody)
	}
	// The words score as body words; the pair terms only narrow the candidates.
	pairs, _ := phraseTerms(terms)
	qs := make([]query.Query, 0, len(terms))
	for _, t := range terms {
		qs = append(qs, termQ(fBody, t, boostBody))
	}
	if len(pairs) == 0 {
		return query.NewConjunctionQuery(qs)
	}
	fs := make([]query.Query, len(pairs))
	for i, p := range pairs {
		fs[i] = termQ(fPairs, p, 1)
	}
	b := query.NewBooleanQuery(qs, nil, nil)
	b.AddFilter(query.NewConjunctionQuery(fs))
	return b
}

// clauseQuery is the bleve query of one clause, ignoring its negation.
func clauseQuery(c clause) query.Query {
	switch c.kind {
	case kHas:
		return termQ(fHas, "attachment", 1)
	case kBefore, kAfter:
		v := float64(day(c.ms))
		var q *query.NumericRangeQuery
		if c.kind == kBefore {
			q = query.NewNumericRangeInclusiveQuery(nil, &v, nil, boolp(false))
		} else {
			q = query.NewNumericRangeInclusiveQuery(&v, nil, boolp(true), nil)
		}
		q.SetField(fDay)
		return q
	}
	if c.field != "" {
		boost := boostAddress
		if c.field == fSubject {
			boost = boostSubject
		}
		return phraseQ(c.field, c.terms, boost)
	}
	return query.NewDisjunctionQuery([]query.Query{
		phraseQ(fSubject, c.terms, boostSubject),
		phraseQ(fFrom, c.terms, boostAddress),
		phraseQ(fTo, c.terms, boostAddress),
		bodyQ(c.terms),
	})
}

func boolp(b bool) *bool { return &b }
