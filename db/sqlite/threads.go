package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/inboxd/inboxd/db"
)

const threadColumns = "t.id, t.uuid, t.last_ts, t.last_message, t.message_count, t.attachment_count, t.received_ts, t.sent_ts, t.quarantined, t.senders, t.recipients, t.labels"

type threadRow struct {
	db.Thread
	lastTS      int64
	lastMessage int64
	kept        bool // senders, recipients and labels came from the row (migration 0007)
}

func scanThread(row interface{ Scan(...any) error }) (*threadRow, error) {
	var (
		t              threadRow
		received, sent sql.NullInt64
		senders        sql.NullString
		recipients     sql.NullString
		labels         sql.NullString
	)
	if err := row.Scan(&t.ID, &t.ThreadID, &t.lastTS, &t.lastMessage, &t.MessageCount, &t.AttachmentCount, &received, &sent, &t.Quarantined,
		&senders, &recipients, &labels); err != nil {
		return nil, err
	}
	if senders.Valid && recipients.Valid && labels.Valid {
		t.kept = true
		t.Senders, t.Recipients, t.Labels = db.DecodeList(senders.String), db.DecodeList(recipients.String), db.DecodeList(labels.String)
	}
	ts := fromMillis(t.lastTS)
	t.Timestamp = &ts
	if received.Valid {
		r := fromMillis(received.Int64)
		t.ReceivedTimestamp = &r
	}
	if sent.Valid {
		s := fromMillis(sent.Int64)
		t.SentTimestamp = &s
	}
	return &t, nil
}

// ListThreads returns one page of an inbox's threads, newest activity first. Triage
// filters apply to each thread's latest message. Threads whose messages are all trashed
// are hidden unless IncludeTrash; quarantined ones unless the labels ask for them.
//
// Errors: invalid_argument (page token).
func (s *Store) ListThreads(ctx context.Context, inboxID int64, f db.MessageFilter, limit int, pageToken string) ([]db.Thread, string, error) {
	scope := f.Scope("threads", inboxID)
	c, err := s.decodeToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	var q strings.Builder
	args := []any{inboxID}
	q.WriteString("SELECT " + threadColumns + " FROM threads t JOIN messages lm ON lm.id = t.last_message WHERE t.inbox_id = +?")
	filterWhere(f, "lm", &q, &args)
	for _, l := range f.Labels {
		q.WriteString(` AND EXISTS (SELECT 1 FROM messages m JOIN message_labels l ON l.message_id = m.id
			WHERE m.thread_id = t.id AND l.label = +?)`)
		args = append(args, l)
	}
	if !f.IncludeTrash {
		q.WriteString(" AND t.all_trashed = 0")
	}
	if !f.Has(db.LabelQuarantined) {
		q.WriteString(" AND t.quarantined = 0")
	}
	page, pageArgs := keyset("t.last_ts", "t.id", true, c, limit)
	q.WriteString(page)
	args = append(args, pageArgs...)
	var rows []*threadRow
	err = s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		for r.Next() {
			t, err := scanThread(r)
			if err != nil {
				r.Close()
				return err
			}
			rows = append(rows, t)
		}
		r.Close()
		if err := r.Err(); err != nil {
			return err
		}
		if len(rows) > limit {
			rows = rows[:limit+1] // keep the extra row only to know a next page exists
		}
		return fillThreads(ctx, tx, rows)
	})
	if err != nil {
		return nil, "", err
	}
	rows, next := db.CutPage(s.tokens, scope, rows, limit, func(t *threadRow) (int64, int64) { return t.lastTS, t.ID })
	out := make([]db.Thread, len(rows))
	for i, t := range rows {
		out[i] = t.Thread
	}
	return out, next, nil
}

// fillThreads completes the aggregates that are cheaper to read than to store: the
// latest message's subject, preview and triage, the label union, senders and recipients.
func fillThreads(ctx context.Context, tx *sql.Tx, ts []*threadRow) error {
	if len(ts) == 0 {
		return nil
	}
	idx := map[int64]*threadRow{}
	lastArgs := make([]any, len(ts))
	var threadArgs []any
	for i, t := range ts {
		idx[t.ID] = t
		lastArgs[i] = t.lastMessage
		if !t.kept {
			threadArgs = append(threadArgs, t.ID)
			t.Labels, t.Senders, t.Recipients = []string{}, []string{}, []string{}
		}
	}
	lasts, err := querySummaries(ctx, tx, "SELECT "+summaryColumns+messageFrom+" WHERE m.id IN ("+placeholders(len(ts))+")", lastArgs...)
	if err != nil {
		return err
	}
	for _, m := range lasts {
		t := idx[m.ThreadRowID]
		t.InboxID = m.InboxID
		t.Subject = m.Subject
		t.LastMessageID = m.MessageID
		if !m.Quarantined {
			t.Preview = m.Preview
			t.Triage = m.Triage
		}
	}
	if len(threadArgs) == 0 {
		return nil
	}
	// Threads written before migration 0007 keep no lists: compute them.
	in := placeholders(len(threadArgs))
	err = eachLabel(tx.QueryContext(ctx, `SELECT DISTINCT m.thread_id, l.label FROM message_labels l JOIN messages m ON m.id = l.message_id
		WHERE m.thread_id IN (`+in+") ORDER BY l.label", threadArgs...))(
		func(id int64, l string) { idx[id].Labels = append(idx[id].Labels, l) })
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, "SELECT thread_id, from_addr, to_addrs, cc_addrs FROM messages WHERE thread_id IN ("+in+") ORDER BY ts, id", threadArgs...)
	if err != nil {
		return err
	}
	defer rows.Close()
	seenFrom := map[int64]map[string]bool{}
	seenTo := map[int64]map[string]bool{}
	for rows.Next() {
		var id int64
		var from, to, cc string
		if err := rows.Scan(&id, &from, &to, &cc); err != nil {
			return err
		}
		t := idx[id]
		if seenFrom[id] == nil {
			seenFrom[id], seenTo[id] = map[string]bool{}, map[string]bool{}
		}
		if from != "" && !seenFrom[id][from] {
			seenFrom[id][from] = true
			t.Senders = append(t.Senders, from)
		}
		for _, a := range append(db.DecodeList(to), db.DecodeList(cc)...) {
			if !seenTo[id][a] {
				seenTo[id][a] = true
				t.Recipients = append(t.Recipients, a)
			}
		}
	}
	return rows.Err()
}

// GetThread returns a thread with its messages, oldest first; withBodies loads each
// message's full fields.
//
// Errors: not_found, thread_too_large.
func (s *Store) GetThread(ctx context.Context, inboxID int64, threadID string, withBodies bool) (*db.Thread, error) {
	var out *db.Thread
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		t, err := scanThread(tx.QueryRowContext(ctx, "SELECT "+threadColumns+" FROM threads t WHERE t.inbox_id = ? AND t.uuid = ?", inboxID, threadID))
		if errors.Is(err, sql.ErrNoRows) {
			return db.Errorf(db.ECodeNotFound, "thread %s not found", threadID)
		}
		if err != nil {
			return err
		}
		if err := db.CheckThreadMessages(t.MessageCount); err != nil {
			return err
		}
		if withBodies {
			var size int64
			if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(body_size), 0) FROM messages WHERE thread_id = ?", t.ID).Scan(&size); err != nil {
				return err
			}
			if err := db.CheckThreadBodies(size); err != nil {
				return err
			}
		}
		if err := fillThreads(ctx, tx, []*threadRow{t}); err != nil {
			return err
		}
		msgs, err := querySummaries(ctx, tx, "SELECT "+summaryColumns+messageFrom+" WHERE m.thread_id = +? ORDER BY m.ts, m.id", t.ID)
		if err != nil {
			return err
		}
		if withBodies {
			for i := range msgs {
				if err := fillBodies(ctx, tx, &msgs[i]); err != nil {
					return err
				}
			}
		}
		t.Messages = msgs
		out = &t.Thread
		return nil
	})
	return out, err
}
