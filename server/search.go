package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/search"
)

// handleMessagesSearch serves GET /v1/inboxes/{inboxId}/messages/search. The index finds
// the message ids in result order (relevance, then time, then id); the rows come from
// the store, which is the truth.
func (s *Server) handleMessagesSearch(w http.ResponseWriter, r *http.Request, c *call) error {
	if s.lowPriority != nil && s.cfg.Arrivals.receiving() {
		// Mail is arriving: it gets the cores first (priority.go).
		return s.lowPriority.do(r.Context(), func() error { return s.search(w, r, c) })
	}
	return s.search(w, r, c)
}

// search answers a search.
func (s *Server) search(w http.ResponseWriter, r *http.Request, c *call) error {
	ix := s.cfg.Search
	if ix == nil {
		return db.Errorf(db.ECodeNotFound, "searchMessages is not available: this server runs without a search index")
	}
	ctx := r.Context()
	f := filterOf(c)
	raw := c.queryString("query")
	scope := db.SearchScope(c.inbox.ID, raw, f)
	cur, err := s.store.DecodeSearchToken(c.queryString("pageToken"), scope)
	if err != nil {
		return err
	}
	req := search.Request{
		Inbox:  c.inbox.ID,
		Query:  search.Parse(raw),
		Filter: search.Filter{Category: f.Category, NeedsReply: f.NeedsReply, Urgency: f.Urgency},
		Limit:  c.queryInt("limit"),
	}
	if cur != nil {
		req.After = &search.Hit{ID: cur.ID, TS: cur.TS, Score: cur.Score}
	}
	hits, more, err := ix.Search(ctx, req)
	if errors.Is(err, search.ErrNotReady) {
		return &db.Error{Code: db.ECodeUnavailable, Message: "the search index is being rebuilt; retry in a moment", Transient: true, Cause: err}
	}
	if err != nil {
		return err
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	msgs, err := s.store.MessagesByRowID(ctx, c.inbox.ID, ids, f)
	if err != nil {
		return err
	}
	next := ""
	if more {
		last := hits[len(hits)-1]
		next = s.store.EncodeSearchToken(scope, db.SearchCursor{Score: last.Score, TS: last.TS, ID: last.ID})
	}
	writeJSON(w, http.StatusOK, pageOf("messages", summaries(msgs), next))
	return nil
}

// SearchSource is the store as the search indexer reads it.
func SearchSource(store db.Store) search.Source { return searchSource{store} }

type searchSource struct{ s db.Store }

func (src searchSource) StoreID(ctx context.Context) (string, error) { return src.s.SearchStoreID(ctx) }

func (src searchSource) QueueBounds(ctx context.Context) (int64, int64, error) {
	return src.s.IndexQueueBounds(ctx)
}

func (src searchSource) LastSeq(ctx context.Context) (int64, error) { return src.s.IndexQueueLast(ctx) }

func (src searchSource) InboxChanges(ctx context.Context, inbox, after int64, limit int) ([]search.Change, error) {
	return searchChanges(src.s.IndexInboxChanges(ctx, inbox, after, limit))
}

func (src searchSource) Changes(ctx context.Context, after int64, limit int) ([]search.Change, error) {
	return searchChanges(src.s.IndexChanges(ctx, after, limit))
}

func searchChanges(rows []db.IndexChange, err error) ([]search.Change, error) {
	out := make([]search.Change, len(rows))
	for i, c := range rows {
		out[i] = search.Change(c)
	}
	return out, err
}

func (src searchSource) Docs(ctx context.Context, ids []int64) ([]search.Doc, error) {
	docs, err := src.s.IndexDocs(ctx, ids)
	return searchDocs(docs), err
}

func (src searchSource) Scan(ctx context.Context, after int64, limit int) ([]search.Doc, error) {
	docs, err := src.s.ScanIndexDocs(ctx, after, limit)
	return searchDocs(docs), err
}

func (src searchSource) Count(ctx context.Context) (int64, error) { return src.s.CountIndexDocs(ctx) }

func (src searchSource) Trim(ctx context.Context, reader string, through int64) error {
	return src.s.AdvanceReader(ctx, reader, through)
}

func searchDocs(docs []db.IndexDoc) []search.Doc {
	out := make([]search.Doc, len(docs))
	for i, d := range docs {
		out[i] = search.Doc(d)
	}
	return out
}
