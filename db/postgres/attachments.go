package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/inboxd/inboxd/db"
)

// Attachments: their rows, and their bytes in attachment_chunks of chunkSize bytes read
// one chunk per query (attachmentChunk), so a download holds one chunk in memory and no
// connection or transaction between reads: a slow client costs no pooled connection.

// attachmentQuery reads what db.Attachment holds, of attachments a, its message m and
// inbox i.
const attachmentQuery = `SELECT a.id, a.uuid, a.filename, a.content_type, a.size, i.uuid, m.uuid, m.quarantined, m.protection,
	i.retired_at IS NOT NULL FROM attachments a JOIN messages m ON m.id = a.message_id JOIN inboxes i ON i.id = m.inbox_id`

func scanAttachment(row rowScanner) (*db.Attachment, error) {
	var (
		a    db.Attachment
		prot *string
	)
	if err := row.Scan(&a.ID, &a.AttachmentID, &a.Filename, &a.ContentType, &a.Size, &a.InboxUUID, &a.MessageUUID, &a.Quarantined,
		&prot, &a.Retired); err != nil {
		return nil, err
	}
	var p *db.Protection
	if err := parseOptional(prot, &p); err != nil {
		return nil, err
	}
	a.AVClean = db.AVCleanVerdict(p)
	return &a, nil
}

// GetAttachment returns an attachment of a message of an inbox.
//
// Errors: not_found.
func (s *Store) GetAttachment(ctx context.Context, inboxID int64, messageID, attachmentID string) (*db.Attachment, error) {
	a, err := scanAttachment(s.pool.QueryRow(ctx, attachmentQuery+" WHERE m.inbox_id = $1 AND m.message_id = $2 AND a.uuid = $3",
		inboxID, messageID, attachmentID))
	if noRows(err) {
		return nil, db.Errorf(db.ECodeNotFound, "attachment %s not found", attachmentID)
	}
	if err != nil {
		return nil, storageError(err)
	}
	return a, nil
}

// OpenAttachment returns an attachment named by the ids a download URL carries, and a
// reader of its bytes.
//
// Errors: not_found (also from the reader, when the message is deleted while it is read).
func (s *Store) OpenAttachment(ctx context.Context, inboxUUID, messageUUID, attachmentID string) (*db.Attachment, db.AttachmentBody, error) {
	a, err := scanAttachment(s.pool.QueryRow(ctx, attachmentQuery+" WHERE i.uuid = $1 AND m.uuid = $2 AND a.uuid = $3",
		inboxUUID, messageUUID, attachmentID))
	if noRows(err) {
		return nil, nil, db.Errorf(db.ECodeNotFound, "attachment not found")
	}
	if err != nil {
		return nil, nil, storageError(err)
	}
	return a, db.NewChunkedBody(a.Size, attachmentChunk(ctx, s.pool, a.ID)), nil
}

// attachmentChunk returns a loader of the bytes of attachment row (db.NewChunkedBody),
// each chunk in a query of its own.
func attachmentChunk(ctx context.Context, pool *pgxpool.Pool, row int64) func(off int64) ([]byte, int64, error) {
	return func(off int64) ([]byte, int64, error) {
		seq := off / chunkSize
		var chunk []byte
		err := pool.QueryRow(ctx, "SELECT data FROM attachment_chunks WHERE attachment_id = $1 AND seq = $2", row, seq).Scan(&chunk)
		if noRows(err) {
			return nil, 0, db.Errorf(db.ECodeNotFound, "attachment not found")
		}
		return chunk, seq * chunkSize, storageError(err)
	}
}
