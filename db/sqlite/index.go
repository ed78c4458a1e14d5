package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// The change log of full-text search (index_queue, migration 0002). Every write that
// changes what a search can return calls enqueueIndex in its own transaction; each search
// index reads the log in order, loads what it needs with IndexDocs, and records its cursor
// once it has the changes on disk (AdvanceReader, migration 0013); the log drops what
// every reader has passed.

// enqueueIndex queues the messages matched by where (a condition on messages m) for
// reindexing. Call it in the transaction that changes them: a new message, a label change
// (trash and quarantine hide a message from search), a triage result, a release from
// quarantine.
func enqueueIndex(ctx context.Context, tx *sql.Tx, where string, args ...any) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO index_queue(message, inbox, ts) SELECT m.id, m.inbox_id, m.ts FROM messages m WHERE "+where, args...)
	return err
}

// enqueueInboxDrop queues the removal of every message of a deleted inbox from the index.
func enqueueInboxDrop(ctx context.Context, tx *sql.Tx, inboxID int64) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO index_queue(message, inbox, ts) VALUES (NULL, ?, 0)", inboxID)
	return err
}

// SearchStoreID identifies this database to its search index.
func (s *Store) SearchStoreID(ctx context.Context) (string, error) {
	var v []byte
	err := s.r.QueryRowContext(ctx, "SELECT value FROM settings WHERE name = 'search_store_id'").Scan(&v)
	return string(v), storageError(err)
}

// IndexQueueBounds returns the newest sequence number ever committed to the index queue
// (0 when none) and the oldest still queued (last+1 when the queue is empty). An index that
// recorded less than first-1 missed changes that were trimmed: it is older than the store.
func (s *Store) IndexQueueBounds(ctx context.Context) (last, first int64, err error) {
	err = s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'index_queue'), 0)").Scan(&last); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, "SELECT COALESCE(MIN(seq), ?) FROM index_queue", last+1).Scan(&first)
	})
	return last, first, err
}

// IndexQueueLast returns the newest sequence number ever committed to the index queue:
// what CatchUp waits for the index to reach.
func (s *Store) IndexQueueLast(ctx context.Context) (int64, error) {
	var last int64
	err := s.r.QueryRowContext(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'index_queue'), 0)").Scan(&last)
	return last, storageError(err)
}

// IndexInboxChanges returns up to limit changes after seq queued for one inbox, in
// order: what a search there matches itself because the index does not hold it yet. It
// reads only the rows after `after`, by the queue's primary key.
func (s *Store) IndexInboxChanges(ctx context.Context, inbox, after int64, limit int) ([]db.IndexChange, error) {
	return s.indexChanges(ctx, inboxChangesQuery, after, inbox, limit)
}

// inboxChangesQuery reads through index_queue_by_inbox (migration 0011), not every pending
// row of every inbox.
const inboxChangesQuery = "SELECT seq, COALESCE(message, 0), inbox, ts FROM index_queue WHERE seq > ? AND inbox = +? ORDER BY seq LIMIT +?"

// IndexChanges returns up to limit queued changes after seq, in order.
func (s *Store) IndexChanges(ctx context.Context, after int64, limit int) ([]db.IndexChange, error) {
	return s.indexChanges(ctx, "SELECT seq, COALESCE(message, 0), inbox, ts FROM index_queue WHERE seq > ? ORDER BY seq LIMIT +?", after, limit)
}

func (s *Store) indexChanges(ctx context.Context, query string, args ...any) ([]db.IndexChange, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, storageError(err)
	}
	defer rows.Close()
	var out []db.IndexChange
	for rows.Next() {
		var c db.IndexChange
		if err := rows.Scan(&c.Seq, &c.Message, &c.Inbox, &c.TS); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, storageError(rows.Err())
}

// AdvanceReader records reader's cursor and when it was seen, forgets the readers not
// seen within db.ReaderRetention, and drops the changes every remaining reader has
// passed.
//
// Errors: invalid_argument (no reader id).
func (s *Store) AdvanceReader(ctx context.Context, reader string, through int64) error {
	if reader == "" {
		return db.Errorf(db.ECodeInvalidArgument, "reader: a change log reader needs an id")
	}
	now := s.Now()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO change_readers(reader, seq, seen_at) VALUES (?, ?, ?)
			ON CONFLICT(reader) DO UPDATE SET seq = excluded.seq, seen_at = excluded.seen_at`, reader, through, millis(now)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM change_readers WHERE seen_at < ?", millis(now.Add(-db.ReaderRetention))); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM index_queue WHERE seq <= (SELECT MIN(seq) FROM change_readers)")
		return err
	})
}

// searchable is the condition on messages m that a search may return it: not quarantined
// and not trashed (API-NOTES sections 4 and 7).
const searchable = "m.quarantined = 0 AND NOT EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'trash')"

const indexDocColumns = "m.id, m.inbox_id, m.ts, m.subject, m.from_addr, m.to_addrs, m.cc_addrs, m.body, m.tri_category, m.tri_reply, m.tri_urgency, m.attachment_count, " +
	"EXISTS (SELECT 1 FROM triage_queue q WHERE q.message_id = m.id)"

// IndexDocs returns the searchable messages among ids, in no particular order; a message
// that is missing, trashed or quarantined is left out, which tells the indexer to drop it.
func (s *Store) IndexDocs(ctx context.Context, ids []int64) ([]db.IndexDoc, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := idArgs(ids)
	var out []db.IndexDoc
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		out, err = queryIndexDocs(ctx, tx, "SELECT "+indexDocColumns+" FROM messages m WHERE m.id IN ("+placeholders(len(ids))+") AND "+searchable, args...)
		return err
	})
	return out, err
}

// ScanIndexDocs returns up to limit searchable messages with a row id above after, in
// row id order: a rebuild reads the whole store this way.
func (s *Store) ScanIndexDocs(ctx context.Context, after int64, limit int) ([]db.IndexDoc, error) {
	var out []db.IndexDoc
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		out, err = queryIndexDocs(ctx, tx, "SELECT "+indexDocColumns+" FROM messages m WHERE m.id > ? AND "+searchable+" ORDER BY m.id LIMIT +?", after, limit)
		return err
	})
	return out, err
}

// CountIndexDocs returns how many messages a full index holds.
func (s *Store) CountIndexDocs(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages m WHERE "+searchable).Scan(&n)
	return n, storageError(err)
}

func queryIndexDocs(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]db.IndexDoc, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	var out []db.IndexDoc
	var withAttachments []any
	at := map[int64]int{}
	for rows.Next() {
		var (
			d              db.IndexDoc
			to, cc         string
			cat, rep, urg  sql.NullString
			attachmentRows int
			body           []byte
		)
		if err := rows.Scan(&d.ID, &d.Inbox, &d.TS, &d.Subject, &d.From, &to, &cc, &body, &cat, &rep, &urg, &attachmentRows, &d.TriagePending); err != nil {
			rows.Close()
			return nil, err
		}
		var err error
		if d.Body, _, _, err = unpackBody(body, false); err != nil {
			rows.Close()
			return nil, err
		}
		d.To = append(db.DecodeList(to), db.DecodeList(cc)...)
		d.Category, d.NeedsReply, d.Urgency = cat.String, rep.String, urg.String
		if attachmentRows > 0 {
			at[d.ID] = len(out)
			withAttachments = append(withAttachments, d.ID)
		}
		out = append(out, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(withAttachments) == 0 {
		return out, nil
	}
	rows, err = tx.QueryContext(ctx, "SELECT message_id, filename FROM attachments WHERE message_id IN ("+placeholders(len(withAttachments))+") ORDER BY message_id, position", withAttachments...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		out[at[id]].Attachments = append(out[at[id]].Attachments, name)
	}
	return out, rows.Err()
}

// MessagesByRowID returns the summaries of the given messages of an inbox in the order
// of ids, leaving out any that is gone, hidden from search, or no longer matches f's
// triage filters (the index can trail a change by a moment).
func (s *Store) MessagesByRowID(ctx context.Context, inboxID int64, ids []int64, f db.MessageFilter) ([]db.Message, error) {
	if len(ids) == 0 {
		return []db.Message{}, nil
	}
	var q strings.Builder
	args := []any{inboxID}
	// The rows are looked up by row id: NOT INDEXED keeps SQLite from walking the inbox's
	// time index instead (with twenty ids it prefers that, and reads the whole inbox).
	q.WriteString("SELECT " + summaryColumns + messageFrom + " NOT INDEXED" +
		" WHERE m.inbox_id = ? AND " + searchable)
	filterWhere(f, "m", &q, &args)
	q.WriteString(" AND m.id IN (" + placeholders(len(ids)) + ")")
	for _, id := range ids {
		args = append(args, id)
	}
	var rows []db.Message
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		rows, err = querySummaries(ctx, tx, q.String(), args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return db.InOrderOf(ids, rows), nil
}

// EncodeSearchToken signs a cursor for scope (db.Signer.SearchToken).
func (s *Store) EncodeSearchToken(scope string, c db.SearchCursor) string {
	return s.tokens.SearchToken(scope, c)
}

// DecodeSearchToken returns the cursor of a token issued for scope; "" is the first page.
//
// Errors: invalid_argument (naming pageToken).
func (s *Store) DecodeSearchToken(token, scope string) (*db.SearchCursor, error) {
	return s.tokens.DecodeSearchToken(token, scope)
}
