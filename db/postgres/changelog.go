package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// The change log of the search indexes (db.ChangeLog). Every process keeps an index of
// its own and reads the log with a cursor of its own (change_readers); the writes append
// to it in the transaction of their change (log.go: enqueueIndex, in commit order), and
// log_heads.last is the newest seq committed. The log drops what every reader seen within
// db.ReaderRetention has passed.

// SearchStoreID identifies this database to its search indexes.
func (s *Store) SearchStoreID(ctx context.Context) (string, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM settings WHERE name = 'search_store_id'").Scan(&v)
	return string(v), storageError(err)
}

// IndexQueueBounds returns the newest seq ever committed to the log (0 when none) and the
// oldest still kept (last+1 when none is), read in one snapshot.
func (s *Store) IndexQueueBounds(ctx context.Context) (last, first int64, err error) {
	err = storageError(s.pool.QueryRow(ctx, `SELECT h.last, COALESCE((SELECT MIN(seq) FROM index_queue), h.last + 1)
		FROM log_heads h WHERE h.name = 'index_queue'`).Scan(&last, &first))
	return last, first, err
}

// IndexQueueLast returns the newest seq ever committed to the log: what a search waits
// for its index to reach.
func (s *Store) IndexQueueLast(ctx context.Context) (int64, error) {
	var last int64
	err := s.pool.QueryRow(ctx, "SELECT last FROM log_heads WHERE name = 'index_queue'").Scan(&last)
	return last, storageError(err)
}

// IndexChanges returns up to limit changes after seq, in order.
func (s *Store) IndexChanges(ctx context.Context, after int64, limit int) ([]db.IndexChange, error) {
	return s.indexChanges(ctx, "SELECT seq, COALESCE(message, 0), inbox, ts FROM index_queue WHERE seq > $1 ORDER BY seq LIMIT $2",
		after, limit)
}

// IndexInboxChanges returns up to limit changes after seq of one inbox, in order
// (index_queue_by_inbox): what a search there matches itself while the index trails.
func (s *Store) IndexInboxChanges(ctx context.Context, inbox, after int64, limit int) ([]db.IndexChange, error) {
	return s.indexChanges(ctx, `SELECT seq, COALESCE(message, 0), inbox, ts FROM index_queue WHERE inbox = $1 AND seq > $2
		ORDER BY seq LIMIT $3`, inbox, after, limit)
}

func (s *Store) indexChanges(ctx context.Context, query string, args ...any) ([]db.IndexChange, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, storageError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.IndexChange, error) {
		var c db.IndexChange
		return c, r.Scan(&c.Seq, &c.Message, &c.Inbox, &c.TS)
	})
	return out, storageError(err)
}

// AdvanceReader records reader's cursor and when it was seen, forgets the readers not seen
// within db.ReaderRetention, and drops the changes every remaining reader has passed.
// Readers of several processes advance at once: each deletes below the lowest cursor it
// sees, and a row two of them delete is deleted once (the second waits for the first's
// row lock and finds it gone).
//
// Errors: invalid_argument (no reader id).
func (s *Store) AdvanceReader(ctx context.Context, reader string, through int64) error {
	if reader == "" {
		return db.Errorf(db.ECodeInvalidArgument, "reader: a change log reader needs an id")
	}
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO change_readers(reader, seq, seen_at) VALUES ($1, $2, $3)
			ON CONFLICT (reader) DO UPDATE SET seq = excluded.seq, seen_at = excluded.seen_at`, reader, through, millis(w.now)); err != nil {
			return err
		}
		if _, err := w.exec("DELETE FROM change_readers WHERE seen_at < $1", millis(w.now.Add(-db.ReaderRetention))); err != nil {
			return err
		}
		_, err := w.exec("DELETE FROM index_queue WHERE seq <= (SELECT MIN(seq) FROM change_readers)")
		return err
	})
}

// searchable is the condition on messages m that a search may return it: not quarantined
// and not trashed (API-NOTES sections 4 and 7).
const searchable = "NOT m.quarantined AND NOT EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'trash')"

// indexDocColumns are what scanIndexDoc reads: the attachments' names come along as an
// array, so a document needs no second query.
const indexDocColumns = `m.id, m.inbox_id, m.ts, m.subject, m.from_addr, m.to_addrs, m.cc_addrs, m.body_text,
	m.tri_category, m.tri_reply, m.tri_urgency,
	ARRAY(SELECT a.filename FROM attachments a WHERE a.message_id = m.id ORDER BY a.position),
	EXISTS (SELECT 1 FROM triage_queue q WHERE q.message_id = m.id)`

func scanIndexDoc(r pgx.CollectableRow) (db.IndexDoc, error) {
	var (
		d             db.IndexDoc
		to, cc        string
		cat, rep, urg *string
	)
	if err := r.Scan(&d.ID, &d.Inbox, &d.TS, &d.Subject, &d.From, &to, &cc, &d.Body, &cat, &rep, &urg, &d.Attachments,
		&d.TriagePending); err != nil {
		return d, err
	}
	d.To = append(db.DecodeList(to), db.DecodeList(cc)...)
	d.Category, d.NeedsReply, d.Urgency = deref(cat), deref(rep), deref(urg)
	if len(d.Attachments) == 0 {
		d.Attachments = nil
	}
	return d, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (s *Store) indexDocs(ctx context.Context, where string, args ...any) ([]db.IndexDoc, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+indexDocColumns+" FROM messages m WHERE "+where, args...)
	if err != nil {
		return nil, storageError(err)
	}
	out, err := pgx.CollectRows(rows, scanIndexDoc)
	return out, storageError(err)
}

// IndexDocs returns the searchable messages among ids, in no particular order; a message
// that is missing, trashed or quarantined is left out, which tells the indexer to drop it.
func (s *Store) IndexDocs(ctx context.Context, ids []int64) ([]db.IndexDoc, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.indexDocs(ctx, "m.id = ANY($1) AND "+searchable, ids)
}

// ScanIndexDocs returns up to limit searchable messages with a row id above after, in row
// id order: a rebuild reads the whole store this way, a page at a time.
func (s *Store) ScanIndexDocs(ctx context.Context, after int64, limit int) ([]db.IndexDoc, error) {
	return s.indexDocs(ctx, "m.id > $1 AND "+searchable+" ORDER BY m.id LIMIT $2", after, limit)
}

// CountIndexDocs returns how many messages a full index holds.
func (s *Store) CountIndexDocs(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM messages m WHERE "+searchable).Scan(&n)
	return n, storageError(err)
}

// MessagesByRowID returns the summaries of the given messages of an inbox in the order of
// ids, leaving out any that is gone, hidden from search, or no longer matches f's triage
// filters (the index can trail a change by a moment).
func (s *Store) MessagesByRowID(ctx context.Context, inboxID int64, ids []int64, f db.MessageFilter) ([]db.Message, error) {
	if len(ids) == 0 {
		return []db.Message{}, nil
	}
	var q strings.Builder
	var args sqlArgs
	q.WriteString("SELECT " + summaryColumns + messageFrom + " WHERE m.inbox_id = " + args.add(inboxID) + " AND " + searchable)
	filterWhere(f, "m", &q, &args)
	q.WriteString(" AND m.id = ANY(" + args.add(ids) + ")")
	rows, err := querySummaries(ctx, s.pool, q.String(), args...)
	if err != nil {
		return nil, storageError(err)
	}
	return db.InOrderOf(ids, rows), nil
}

// EncodeSearchToken signs a search cursor for scope.
func (s *Store) EncodeSearchToken(scope string, c db.SearchCursor) string {
	return s.tokens.SearchToken(scope, c)
}

// DecodeSearchToken returns the cursor of a token issued for scope; "" is the first page.
//
// Errors: invalid_argument (naming pageToken).
func (s *Store) DecodeSearchToken(token, scope string) (*db.SearchCursor, error) {
	return s.tokens.DecodeSearchToken(token, scope)
}
