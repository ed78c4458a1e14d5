package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/inboxd/inboxd/db"
)

// Large raw messages and attachments are stored in chunks (migration 0012): a 25 MiB
// message is never one value that SQLite and Go each copy whole, and a download streams
// one chunk at a time. chunkSize bounds what one chunk costs in memory while it is
// written or read; a download holds one chunk, so a thousand slow downloads hold 256 MB at
// most, not a thousand whole attachments.
const chunkSize = 256 << 10

// insertRawChunks stores the raw bytes head+rest of message row as compressed chunks:
// head is the trace field the SMTP listener put before the bytes the client sent, which
// is never copied in front of them whole.
func insertRawChunks(ctx context.Context, tx *sql.Tx, messageRow int64, head string, rest []byte) error {
	enc, _ := codec()
	var first, frame []byte
	for seq := 0; len(head) > 0 || len(rest) > 0; seq++ {
		chunk := rest
		if len(head) > 0 {
			// The first chunk: the head (a few hundred bytes) and the start of rest.
			n := min(len(rest), max(chunkSize-len(head), 0))
			first = append(append(first[:0], head...), rest[:n]...)
			chunk, head, rest = first, "", rest[n:]
		} else {
			n := min(len(rest), chunkSize)
			chunk, rest = rest[:n], rest[n:]
		}
		frame = enc.EncodeAll(chunk, frame[:0])
		if _, err := tx.ExecContext(ctx, "INSERT INTO raw_chunks(message_id, seq, data) VALUES (?, ?, ?)", messageRow, seq, frame); err != nil {
			return err
		}
	}
	return nil
}

// insertAttachmentChunks stores content as the chunks of attachment row.
func insertAttachmentChunks(ctx context.Context, tx *sql.Tx, attachmentRow int64, content []byte) error {
	for seq := 0; len(content) > 0; seq++ {
		n := min(len(content), chunkSize)
		if _, err := tx.ExecContext(ctx, "INSERT INTO attachment_chunks(attachment_id, seq, data) VALUES (?, ?, ?)",
			attachmentRow, seq, content[:n]); err != nil {
			return err
		}
		content = content[n:]
	}
	return nil
}

// rowQuerier is a *sql.Tx or a *sql.DB.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// loadRaw returns the raw RFC 5322 bytes of message row whose packed body is body: from
// the body itself, or from its chunks (layout 4). With limit > 0 it stops once it has at
// least limit bytes (the reviewer sees only the header).
func loadRaw(ctx context.Context, q rowQuerier, messageRow int64, body []byte, limit int) ([]byte, error) {
	if len(body) == 0 || body[0] != bodyChunked {
		_, _, raw, err := unpackBody(body, true)
		return raw, err
	}
	_, dec := codec()
	var raw, frame []byte
	for seq := 0; limit <= 0 || len(raw) < limit; seq++ {
		err := q.QueryRowContext(ctx, "SELECT data FROM raw_chunks WHERE message_id = ? AND seq = ?", messageRow, seq).Scan(&frame)
		if errors.Is(err, sql.ErrNoRows) {
			if seq == 0 {
				return nil, fmt.Errorf("%w: message %d has no raw chunks", errBody, messageRow)
			}
			break
		}
		if err != nil {
			return nil, err
		}
		if raw, err = dec.DecodeAll(frame, raw); err != nil {
			return nil, fmt.Errorf("%w: raw chunk %d of message %d: %v", errBody, seq, messageRow, err)
		}
	}
	return raw, nil
}

// attachmentChunk returns a loader of the bytes of attachment row (db.NewChunkedBody),
// each chunk read in a query of its own: a slow client holds no read transaction open
// (which would keep the WAL from being checkpointed). All of the content is one chunk when
// it is not chunked (an attachment stored before chunks, or one of at most chunkSize
// bytes).
func attachmentChunk(ctx context.Context, r readerPool, row int64, chunked bool) func(off int64) ([]byte, int64, error) {
	return func(off int64) ([]byte, int64, error) {
		var chunk []byte
		var base int64
		var err error
		if !chunked {
			err = r.QueryRowContext(ctx, "SELECT content FROM attachments WHERE id = ?", row).Scan(&chunk)
		} else {
			seq := off / chunkSize
			base = seq * chunkSize
			err = r.QueryRowContext(ctx, "SELECT data FROM attachment_chunks WHERE attachment_id = ? AND seq = ?", row, seq).Scan(&chunk)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil, 0, db.Errorf(db.ECodeNotFound, "attachment not found")
		}
		return chunk, base, storageError(err)
	}
}
