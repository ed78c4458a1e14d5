package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// Reading threads. A thread row keeps its aggregates and lists (every writer of its
// messages does, tx_messages.go); what it shows of its latest message (subject, preview,
// triage, id) comes from that message, joined as lm, and the inbox's address from i.

// threadColumns are what scanThread reads, of threads t, its latest message lm and its
// inbox i (threadFrom).
const threadColumns = `t.id, t.uuid, t.last_ts, t.message_count, t.attachment_count, t.received_ts, t.sent_ts, t.quarantined,
	t.senders, t.recipients, t.labels, i.address, lm.message_id, lm.subject, lm.preview, lm.triage, lm.quarantined`

const threadFrom = " FROM threads t JOIN messages lm ON lm.id = t.last_message JOIN inboxes i ON i.id = t.inbox_id"

// threadRow is a thread and its sort key.
type threadRow struct {
	db.Thread
	lastTS int64
}

func scanThread(row rowScanner) (*threadRow, error) {
	var (
		t                           threadRow
		received, sent              *int64
		senders, recipients, labels *string
		triage                      *string
		lastHeld                    bool
	)
	if err := row.Scan(&t.ID, &t.ThreadID, &t.lastTS, &t.MessageCount, &t.AttachmentCount, &received, &sent, &t.Quarantined,
		&senders, &recipients, &labels, &t.InboxID, &t.LastMessageID, &t.Subject, &t.Preview, &triage, &lastHeld); err != nil {
		return nil, err
	}
	t.Senders, t.Recipients, t.Labels = listOrEmpty(senders), listOrEmpty(recipients), listOrEmpty(labels)
	ts := fromMillis(t.lastTS)
	t.Timestamp = &ts
	t.ReceivedTimestamp, t.SentTimestamp = optTime(received), optTime(sent)
	if lastHeld {
		// A quarantined message's preview and triage are withheld.
		t.Preview = ""
	} else if err := parseOptional(triage, &t.Triage); err != nil {
		return nil, err
	}
	return &t, nil
}

// listOrEmpty decodes a nullable list column; NULL is the empty list.
func listOrEmpty(s *string) []string {
	if s == nil {
		return []string{}
	}
	return db.DecodeList(*s)
}

// optTime is a nullable time column.
func optTime(ms *int64) *db.Time {
	if ms == nil {
		return nil
	}
	t := fromMillis(*ms)
	return &t
}

// ListThreads returns one page of an inbox's threads, newest activity first. Triage
// filters apply to each thread's latest message. Threads whose messages are all trashed
// are hidden unless IncludeTrash; quarantined ones unless the labels ask for them.
//
// Errors: invalid_argument (page token).
func (s *Store) ListThreads(ctx context.Context, inboxID int64, f db.MessageFilter, limit int, pageToken string) ([]db.Thread, string, error) {
	scope := f.Scope("threads", inboxID)
	c, err := s.tokens.DecodePageToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	var q strings.Builder
	var args sqlArgs
	q.WriteString("SELECT " + threadColumns + threadFrom + " WHERE t.inbox_id = " + args.add(inboxID))
	filterWhere(f, "lm", &q, &args)
	for _, l := range f.Labels {
		q.WriteString(` AND EXISTS (SELECT 1 FROM messages m JOIN message_labels l ON l.message_id = m.id
			WHERE m.thread_id = t.id AND l.label = ` + args.add(l) + ")")
	}
	if !f.IncludeTrash {
		q.WriteString(" AND NOT t.all_trashed")
	}
	if !f.Has(db.LabelQuarantined) {
		q.WriteString(" AND NOT t.quarantined")
	}
	q.WriteString(keyset("t.last_ts", "t.id", true, c, limit, &args))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, "", storageError(err)
	}
	threads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*threadRow, error) { return scanThread(r) })
	if err != nil {
		return nil, "", storageError(err)
	}
	threads, next := db.CutPage(s.tokens, scope, threads, limit, func(t *threadRow) (int64, int64) { return t.lastTS, t.ID })
	out := make([]db.Thread, len(threads))
	for i, t := range threads {
		out[i] = t.Thread
	}
	return out, next, nil
}

// GetThread returns a thread with its messages, oldest first; withBodies loads each
// message's full fields. The size checks run before the messages are loaded, in the same
// snapshot.
//
// Errors: not_found, thread_too_large.
func (s *Store) GetThread(ctx context.Context, inboxID int64, threadID string, withBodies bool) (*db.Thread, error) {
	var out *db.Thread
	err := s.read(ctx, func(ctx context.Context, tx pgx.Tx) error {
		t, err := scanThread(tx.QueryRow(ctx, "SELECT "+threadColumns+threadFrom+" WHERE t.inbox_id = $1 AND t.uuid = $2", inboxID, threadID))
		if noRows(err) {
			return db.Errorf(db.ECodeNotFound, "thread %s not found", threadID)
		}
		if err != nil {
			return err
		}
		if err := db.CheckThreadMessages(t.MessageCount); err != nil {
			return err
		}
		columns := summaryColumns
		if withBodies {
			var size int64
			if err := tx.QueryRow(ctx, "SELECT COALESCE(SUM(body_size), 0) FROM messages WHERE thread_id = $1", t.ID).Scan(&size); err != nil {
				return err
			}
			if err := db.CheckThreadBodies(size); err != nil {
				return err
			}
			columns += ", " + bodyColumns
		}
		rows, err := tx.Query(ctx, "SELECT "+columns+messageFrom+" WHERE m.thread_id = $1 ORDER BY m.ts, m.id", t.ID)
		if err != nil {
			return err
		}
		read := scanSummary
		if withBodies {
			read = scanFull
		}
		if t.Messages, err = collectMessages(rows, nil, read); err != nil {
			return err
		}
		if err := fillAttachments(ctx, tx, t.Messages); err != nil {
			return err
		}
		out = &t.Thread
		return nil
	})
	return out, err
}
