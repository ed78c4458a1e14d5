package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// The review dashboard's reads (db.Quarantine): held mail, one scanned message, the audit
// log and the operators' password hashes. The review's actions are units of work of
// package db (tx_messages.go has their Tx methods).

// ListQuarantined returns quarantined messages of live inboxes, newest first, and the
// cursor of the next page (messages_quarantined).
//
// Errors: invalid_argument (before).
func (s *Store) ListQuarantined(ctx context.Context, f db.QuarantineFilter) ([]db.QuarantineItem, string, error) {
	size := f.PageSize()
	ts, row, after, err := f.ReviewCursor()
	if err != nil {
		return nil, "", err
	}
	var q strings.Builder
	var args sqlArgs
	q.WriteString(`SELECT m.id, m.uuid, i.account_id, i.address, m.message_id, m.from_addr, m.subject, m.ts, m.protection, m.attachment_count
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.quarantined AND i.retired_at IS NULL`)
	if f.AccountID != "" {
		q.WriteString(" AND i.account_id = " + args.add(f.AccountID))
	}
	if f.Inbox != "" {
		q.WriteString(" AND i.address = " + args.add(strings.ToLower(f.Inbox)))
	}
	if after {
		q.WriteString(" AND (m.ts, m.id) < (" + args.add(ts) + ", " + args.add(row) + ")")
	}
	q.WriteString(" ORDER BY m.ts DESC, m.id DESC LIMIT " + strconv.Itoa(size+1))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	out, err := collect(rows, err, func(r pgx.CollectableRow) (db.QuarantineItem, error) {
		var it db.QuarantineItem
		var ts int64
		var prot *string
		if err := r.Scan(&it.RowID, &it.UUID, &it.AccountID, &it.Inbox, &it.MessageID, &it.From, &it.Subject, &ts, &prot, &it.AttachmentCount); err != nil {
			return it, err
		}
		it.Timestamp = fromMillis(ts).Time
		return it, parseJSON(prot, &it.Protection)
	})
	if err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.ReviewPage(out, size)
	return out, next, nil
}

// QuarantineCounts returns, per account and inbox, how many messages wait for review.
func (s *Store) QuarantineCounts(ctx context.Context) ([]db.QuarantineCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT i.account_id, i.address, COUNT(*) FROM messages m JOIN inboxes i ON i.id = m.inbox_id
		WHERE m.quarantined AND i.retired_at IS NULL GROUP BY i.account_id, i.address ORDER BY i.account_id, i.address`)
	out, err := collect(rows, err, func(r pgx.CollectableRow) (db.QuarantineCount, error) {
		var c db.QuarantineCount
		return c, r.Scan(&c.AccountID, &c.Inbox, &c.Count)
	})
	if len(out) == 0 {
		out = nil // as the SQLite store answers: no inbox waits
	}
	return out, storageError(err)
}

// ReviewMessage loads one message that carries a protection verdict, by its internal
// UUID: quarantined, released or clean. Of its raw bytes it reads only the chunks that
// hold the header the reviewer sees.
//
// Errors: not_found.
func (s *Store) ReviewMessage(ctx context.Context, uuid string) (*db.ReviewMessage, error) {
	var m db.ReviewMessage
	err := s.read(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var ts int64
		var prot, detail *string
		var to, cc, replyTo string
		err := tx.QueryRow(ctx, `SELECT m.id, m.uuid, i.account_id, i.address, m.message_id, m.from_addr, m.subject, m.ts,
			m.protection, m.attachment_count, m.quarantined, m.to_addrs, m.cc_addrs, m.reply_to, m.body_text, m.body_html, d.detail,
			ARRAY(SELECT l.label FROM message_labels l WHERE l.message_id = m.id ORDER BY l.label)
			FROM messages m JOIN inboxes i ON i.id = m.inbox_id LEFT JOIN protection_details d ON d.message_id = m.id
			WHERE m.uuid = $1 AND m.protection IS NOT NULL AND i.retired_at IS NULL`, uuid).
			Scan(&m.RowID, &m.UUID, &m.AccountID, &m.Inbox, &m.MessageID, &m.From, &m.Subject, &ts, &prot, &m.AttachmentCount,
				&m.Quarantined, &to, &cc, &replyTo, &m.Text, &m.HTML, &detail, &m.Labels)
		if noRows(err) {
			return db.Errorf(db.ECodeNotFound, "no scanned message %s", uuid)
		}
		if err != nil {
			return err
		}
		m.Timestamp = fromMillis(ts).Time
		m.To, m.Cc, m.ReplyTo = db.DecodeList(to), db.DecodeList(cc), db.DecodeList(replyTo)
		if m.Labels == nil {
			m.Labels = []string{}
		}
		if err := parseJSON(prot, &m.Protection); err != nil {
			return err
		}
		if err := parseOptional(detail, &m.Detail); err != nil {
			return err
		}
		raw, err := rawPrefix(ctx, tx, m.RowID, db.MaxReviewHeader)
		if err != nil {
			return err
		}
		m.Header = db.HeaderSection(raw)
		msgs := []db.Message{{ID: m.RowID, AttachmentCount: m.AttachmentCount}}
		if err := fillAttachments(ctx, tx, msgs); err != nil {
			return err
		}
		m.Attachments = msgs[0].Attachments
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// Audit appends an entry to the audit log (At is the store's clock).
func (s *Store) Audit(ctx context.Context, e db.AuditEntry) error {
	return s.write(ctx, func(w *wtx) error { return w.audit(e) })
}

// AuditLog returns up to limit entries, newest first, older than the entry id before (0
// for the newest).
func (s *Store) AuditLog(ctx context.Context, limit int, before int64) ([]db.AuditEntry, error) {
	var args sqlArgs
	q := "SELECT id, at, actor, action, account_id, inbox, message_id, detail, remote FROM audit_log"
	if before > 0 {
		q += " WHERE id < " + args.add(before)
	}
	rows, err := s.pool.Query(ctx, q+" ORDER BY id DESC LIMIT "+strconv.Itoa(db.AuditPageSize(limit)), args...)
	out, err := collect(rows, err, func(r pgx.CollectableRow) (db.AuditEntry, error) {
		var e db.AuditEntry
		var at int64
		err := r.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.AccountID, &e.Inbox, &e.MessageID, &e.Detail, &e.Remote)
		e.At = fromMillis(at).Time
		return e, err
	})
	if len(out) == 0 {
		out = nil
	}
	return out, storageError(err)
}

// OperatorPasswordHash returns the stored password hash of an operator, or nil when the
// operator has none.
func (s *Store) OperatorPasswordHash(ctx context.Context, name string) ([]byte, error) {
	var h []byte
	err := s.pool.QueryRow(ctx, "SELECT password_hash FROM operators WHERE name = $1", name).Scan(&h)
	if noRows(err) {
		return nil, nil
	}
	return h, storageError(err)
}

// SetOperatorPasswordHash stores an operator's password hash (never the password),
// ends the operator's dashboard sessions and audits the change.
func (s *Store) SetOperatorPasswordHash(ctx context.Context, name string, hash []byte, how string) error {
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO operators(name, password_hash, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash, updated_at = excluded.updated_at`,
			name, hash, millis(w.now)); err != nil {
			return err
		}
		if _, err := w.exec("DELETE FROM dashboard_sessions WHERE operator = $1", name); err != nil {
			return err
		}
		return w.audit(db.AuditEntry{Actor: "system", Action: how, Detail: "operator " + name})
	})
}
