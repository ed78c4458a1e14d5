package search

import "context"

// A search answers from the index and from the changes to its inbox that the indexer has
// not applied yet: it reads those messages' current documents from the store, matches
// and scores them itself (Query.score, the index's rules on the text), and leaves out
// whatever the index still holds of them. So a client finds what it just wrote without
// the search waking the indexer. (A search used to wait for the indexer to apply every
// change queued before it: measured beside SMTP ingest, the searches that hit an inbox
// receiving mail, 4% of them, made it build a segment five times a second instead of
// once, of mail indexed before its triage and again after, and merge four times as much.)

// maxTail is the most queued changes of one inbox a search matches itself. More means
// the indexer is far behind (a burst, a restart), and the search waits for it instead.
const maxTail = 256

// tail is what a search adds to an index snapshot: the current documents of the
// messages with changes the index may not hold yet (messages no longer searchable have
// none), and the ids of all of them, whose indexed documents the search passes over.
type tail struct {
	ids  map[int64]bool
	docs []Doc
}

// frequencies adds the tail's documents to the document frequencies of the clauses'
// words (df, keyed as the index's are) and returns their number, so that a tail hit is
// weighed as it will be once indexed (a new message exactly; the old document of a
// changed one still counts until the indexer replaces it). It returns the documents with
// their words read.
func (t *tail) frequencies(cls []clause, df map[[2]string]uint64) ([]*docTerms, uint64) {
	if t == nil {
		return nil, 0
	}
	dts := make([]*docTerms, len(t.docs))
	for i := range t.docs {
		dt := newDocTerms(&t.docs[i])
		dts[i] = dt
		counted := map[[2]string]bool{} // a word counts once per document, however often asked for
		for _, c := range cls {
			for _, f := range clauseFields(c) {
				for _, term := range c.terms {
					k := [2]string{f, term}
					if !counted[k] && len(dt.in(f)[term]) > 0 {
						counted[k] = true
						df[k]++
					}
				}
			}
		}
	}
	return dts, uint64(len(dts))
}

// hides reports whether the index's document of message id is stale for this search.
func (t *tail) hides(id int64) bool { return t != nil && t.ids[id] }

// tailOf reads the unindexed tail of an inbox. It reports false when the search must
// wait for the indexer instead: the tail is longer than maxTail, or holds the inbox's
// deletion (which the indexer applies to everything the index holds of it).
func (x *Indexer) tailOf(ctx context.Context, inbox int64) (*tail, bool, error) {
	changes, err := x.src.InboxChanges(ctx, inbox, x.applied.Load(), maxTail+1)
	if err != nil || len(changes) == 0 {
		return nil, err == nil, err
	}
	if len(changes) > maxTail {
		return nil, false, nil
	}
	t := &tail{ids: make(map[int64]bool, len(changes))}
	ids := make([]int64, 0, len(changes))
	for _, c := range changes {
		if c.Message == 0 {
			return nil, false, nil
		}
		if !t.ids[c.Message] {
			t.ids[c.Message] = true
			ids = append(ids, c.Message)
		}
	}
	if t.docs, err = x.src.Docs(ctx, ids); err != nil {
		return nil, false, err
	}
	return t, true, nil
}

// tailHits matches the tail's documents (from frequencies) against a search, scored
// with weights (see Query.score), and passes each hit to consider.
func tailHits(dts []*docTerms, req Request, weights [][]float64, consider func(Hit)) {
	for _, dt := range dts {
		d := dt.d
		if d.Inbox != req.Inbox || !req.Filter.admits(d) {
			continue
		}
		if score, ok := req.Query.score(dt, weights); ok {
			consider(Hit{ID: d.ID, TS: d.TS, Score: score})
		}
	}
}
