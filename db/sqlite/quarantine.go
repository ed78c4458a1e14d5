package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
)

// saveProtectionDetail stores a new message's verdict detail (packed), when it has one.
func saveProtectionDetail(ctx context.Context, tx *sql.Tx, rowID int64, detail any) error {
	if detail == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, "INSERT OR REPLACE INTO protection_details(message_id, detail_z) VALUES (?, ?)", rowID, detail)
	return err
}

// ListQuarantined returns quarantined messages of live inboxes, newest first, and the
// cursor of the next page ("" when this is the last).
func (s *Store) ListQuarantined(ctx context.Context, f db.QuarantineFilter) ([]db.QuarantineItem, string, error) {
	size := f.PageSize()
	ts, row, after, err := f.ReviewCursor()
	if err != nil {
		return nil, "", err
	}
	var q strings.Builder
	q.WriteString(`SELECT m.id, m.uuid, i.account_id, i.address, m.message_id, m.from_addr, m.subject, m.ts, m.protection_z, m.attachment_count
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id
		WHERE m.quarantined = 1 AND i.retired_at IS NULL`)
	var args []any
	if f.AccountID != "" {
		q.WriteString(" AND i.account_id = ?")
		args = append(args, f.AccountID)
	}
	if f.Inbox != "" {
		q.WriteString(" AND i.address = ?")
		args = append(args, strings.ToLower(f.Inbox))
	}
	if after {
		q.WriteString(" AND (m.ts, m.id) < (?, ?)")
		args = append(args, ts, row)
	}
	q.WriteString(" ORDER BY m.ts DESC, m.id DESC LIMIT " + strconv.Itoa(size+1))
	var out []db.QuarantineItem
	err = s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var it db.QuarantineItem
			var ts int64
			var prot zjson
			if err := rows.Scan(&it.RowID, &it.UUID, &it.AccountID, &it.Inbox, &it.MessageID, &it.From, &it.Subject, &ts, &prot, &it.AttachmentCount); err != nil {
				return err
			}
			it.Timestamp = fromMillis(ts).Time
			if prot.Valid {
				if err := json.Unmarshal([]byte(prot.String), &it.Protection); err != nil {
					return err
				}
			}
			out = append(out, it)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, "", err
	}
	out, next := db.ReviewPage(out, size)
	return out, next, nil
}

// QuarantineCounts returns, per account and inbox, how many messages wait for review.
func (s *Store) QuarantineCounts(ctx context.Context) ([]db.QuarantineCount, error) {
	var out []db.QuarantineCount
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT i.account_id, i.address, COUNT(*) FROM messages m JOIN inboxes i ON i.id = m.inbox_id
			WHERE m.quarantined = 1 AND i.retired_at IS NULL GROUP BY i.account_id, i.address ORDER BY i.account_id, i.address`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c db.QuarantineCount
			if err := rows.Scan(&c.AccountID, &c.Inbox, &c.Count); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// ReviewMessage loads one message that carries a protection verdict, by its internal
// UUID: quarantined, released or clean.
//
// Errors: not_found.
func (s *Store) ReviewMessage(ctx context.Context, uuid string) (*db.ReviewMessage, error) {
	var m db.ReviewMessage
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var ts int64
		var prot, detail zjson
		var to, cc, replyTo string
		var body []byte
		err := tx.QueryRowContext(ctx, `SELECT m.id, m.uuid, i.account_id, i.address, m.message_id, m.from_addr, m.subject, m.ts,
			m.protection_z, m.attachment_count, m.quarantined, m.to_addrs, m.cc_addrs, m.reply_to, m.body, d.detail_z
			FROM messages m JOIN inboxes i ON i.id = m.inbox_id LEFT JOIN protection_details d ON d.message_id = m.id
			WHERE m.uuid = ? AND m.protection_z IS NOT NULL AND i.retired_at IS NULL`, uuid).
			Scan(&m.RowID, &m.UUID, &m.AccountID, &m.Inbox, &m.MessageID, &m.From, &m.Subject, &ts, &prot, &m.AttachmentCount,
				&m.Quarantined, &to, &cc, &replyTo, &body, &detail)
		if errors.Is(err, sql.ErrNoRows) {
			return db.Errorf(db.ECodeNotFound, "no scanned message %s", uuid)
		}
		if err != nil {
			return err
		}
		m.Timestamp = fromMillis(ts).Time
		m.To, m.Cc, m.ReplyTo = db.DecodeList(to), db.DecodeList(cc), db.DecodeList(replyTo)
		if err := json.Unmarshal([]byte(prot.String), &m.Protection); err != nil {
			return err
		}
		if detail.Valid {
			m.Detail = new(db.ProtectionDetail)
			if err := json.Unmarshal([]byte(detail.String), m.Detail); err != nil {
				return err
			}
		}
		text, html, _, err := unpackBody(body, false)
		if err != nil {
			return err
		}
		raw, err := loadRaw(ctx, tx, m.RowID, body, db.MaxReviewHeader)
		if err != nil {
			return err
		}
		m.Text, m.HTML = text, html
		m.Header = db.HeaderSection(raw)
		msgs := []db.Message{{ID: m.RowID}}
		if err := fillLabelsAndAttachments(ctx, tx, msgs); err != nil {
			return err
		}
		m.Labels, m.Attachments = msgs[0].Labels, msgs[0].Attachments
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func loadForAction(ctx context.Context, tx *sql.Tx, uuid string) (*db.QuarantineItem, bool, error) {
	var it db.QuarantineItem
	var prot zjson
	var quarantined bool
	err := tx.QueryRowContext(ctx, `SELECT m.id, i.account_id, i.address, m.message_id, m.protection_z, m.quarantined
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.uuid = ? AND i.retired_at IS NULL`, uuid).
		Scan(&it.RowID, &it.AccountID, &it.Inbox, &it.MessageID, &prot, &quarantined)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !prot.Valid) {
		return nil, false, db.Errorf(db.ECodeNotFound, "no scanned message %s", uuid)
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal([]byte(prot.String), &it.Protection); err != nil {
		return nil, false, err
	}
	return &it, quarantined, nil
}

func audit(ctx context.Context, tx *sql.Tx, now time.Time, e db.AuditEntry) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_log(at, actor, action, account_id, inbox, message_id, detail, remote)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, millis(now), e.Actor, e.Action, e.AccountID, e.Inbox, e.MessageID, e.Detail, e.Remote)
	return err
}

// Audit appends an entry to the audit log (At is the store's clock).
func (s *Store) Audit(ctx context.Context, e db.AuditEntry) error {
	now := s.Now()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return audit(ctx, tx, now, e) })
}

// AuditLog returns up to limit entries, newest first, older than the entry id before
// (0 for the newest).
func (s *Store) AuditLog(ctx context.Context, limit int, before int64) ([]db.AuditEntry, error) {
	q := "SELECT id, at, actor, action, account_id, inbox, message_id, detail, remote FROM audit_log"
	args := []any{}
	if before > 0 {
		q += " WHERE id < ?"
		args = append(args, before)
	}
	q += " ORDER BY id DESC LIMIT " + strconv.Itoa(db.AuditPageSize(limit))
	var out []db.AuditEntry
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e db.AuditEntry
			var at int64
			if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.AccountID, &e.Inbox, &e.MessageID, &e.Detail, &e.Remote); err != nil {
				return err
			}
			e.At = fromMillis(at).Time
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}

// OperatorPasswordHash returns the stored password hash of an operator, or nil when the
// operator has none.
func (s *Store) OperatorPasswordHash(ctx context.Context, name string) ([]byte, error) {
	var h []byte
	err := s.r.QueryRowContext(ctx, "SELECT password_hash FROM operators WHERE name = ?", name).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return h, storageError(err)
}

// SetOperatorPasswordHash stores an operator's password hash (never the password),
// ends the operator's dashboard sessions and audits the change.
func (s *Store) SetOperatorPasswordHash(ctx context.Context, name string, hash []byte, how string) error {
	now := s.Now()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO operators(name, password_hash, updated_at) VALUES (?, ?, ?)
			ON CONFLICT(name) DO UPDATE SET password_hash = excluded.password_hash, updated_at = excluded.updated_at`,
			name, hash, millis(now)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM dashboard_sessions WHERE operator = ?", name); err != nil {
			return err
		}
		return audit(ctx, tx, now, db.AuditEntry{Actor: "system", Action: how, Detail: "operator " + name})
	})
}
