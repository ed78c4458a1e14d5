package search

import (
	"context"
)

// Filter narrows a search like listMessages' triage filters: complete results only.
type Filter struct {
	Category   string
	NeedsReply string // yes | no | uncertain
	Urgency    string
}

// admits reports whether a document passes the filter, as the index's keyword fields do.
func (f Filter) admits(d *Doc) bool {
	return (f.Category == "" || f.Category == d.Category) &&
		(f.NeedsReply == "" || f.NeedsReply == d.NeedsReply) &&
		(f.Urgency == "" || f.Urgency == d.Urgency)
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
// (trashed or quarantined) messages are never in the index, so they are never found. A
// phrase in the body is trusted to the pair filters (see Indexer.Search for the check
// against the text).
func (ix *Index) Search(ctx context.Context, req Request) ([]Hit, bool, error) {
	return ix.searchPage(ctx, req, nil, nil)
}

func (ix *Index) searchPage(ctx context.Context, req Request, confirm Confirm, t *tail) ([]Hit, bool, error) {
	if len(req.Query.groups) == 0 || req.Limit <= 0 {
		return []Hit{}, false, nil
	}
	out, err := ix.search(ctx, req, req.Limit+1, confirm, t)
	if err != nil {
		return nil, false, err
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
