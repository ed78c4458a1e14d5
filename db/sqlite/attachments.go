package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/inboxd/inboxd/db"
)

const attachmentQuery = `SELECT a.id, a.uuid, a.filename, a.content_type, a.size, a.chunked, i.uuid, m.uuid, m.quarantined, m.protection_z, i.retired_at IS NOT NULL
	FROM attachments a JOIN messages m ON m.id = a.message_id JOIN inboxes i ON i.id = m.inbox_id`

// storedAttachment is an attachment and how its bytes are stored.
type storedAttachment struct {
	db.Attachment
	chunked bool // in attachment_chunks (chunks.go)
}

func scanAttachment(row *sql.Row) (*storedAttachment, error) {
	var (
		a    storedAttachment
		prot zjson
	)
	if err := row.Scan(&a.ID, &a.AttachmentID, &a.Filename, &a.ContentType, &a.Size, &a.chunked, &a.InboxUUID, &a.MessageUUID, &a.Quarantined, &prot, &a.Retired); err != nil {
		return nil, err
	}
	var p *db.Protection
	if prot.Valid {
		p = new(db.Protection)
		if err := json.Unmarshal([]byte(prot.String), p); err != nil {
			return nil, err
		}
	}
	a.AVClean = db.AVCleanVerdict(p)
	return &a, nil
}

// GetAttachment returns an attachment of a message of an inbox.
//
// Errors: not_found.
func (s *Store) GetAttachment(ctx context.Context, inboxID int64, messageID, attachmentID string) (*db.Attachment, error) {
	a, err := scanAttachment(s.r.QueryRowContext(ctx, attachmentQuery+" WHERE m.inbox_id = ? AND m.message_id = ? AND a.uuid = ?",
		inboxID, messageID, attachmentID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.Errorf(db.ECodeNotFound, "attachment %s not found", attachmentID)
	}
	if err != nil {
		return nil, storageError(err)
	}
	return &a.Attachment, nil
}

// OpenAttachment returns an attachment named by the ids a download URL carries, and a
// reader of its bytes that reads them a chunk at a time (attachmentChunk).
//
// Errors: not_found (also from the reader, when the message is deleted while it is read).
func (s *Store) OpenAttachment(ctx context.Context, inboxUUID, messageUUID, attachmentID string) (*db.Attachment, db.AttachmentBody, error) {
	a, err := scanAttachment(s.r.QueryRowContext(ctx, attachmentQuery+" WHERE i.uuid = ? AND m.uuid = ? AND a.uuid = ?",
		inboxUUID, messageUUID, attachmentID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, db.Errorf(db.ECodeNotFound, "attachment not found")
	}
	if err != nil {
		return nil, nil, storageError(err)
	}
	return &a.Attachment, db.NewChunkedBody(a.Size, attachmentChunk(ctx, s.r, a.ID, a.chunked)), nil
}
