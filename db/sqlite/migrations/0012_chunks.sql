-- inboxd schema, version 12: large raw messages and attachments in chunks.
-- A message of up to 25 MiB was one value: written whole from memory, read whole into
-- memory for a download. Stored in chunks of db.chunkSize bytes, each is written and read
-- one chunk at a time, so memory stays bounded whatever the size of the mail; a download
-- streams (and seeks for a Range request) chunk by chunk.
--
-- raw_chunks: the raw RFC 5322 bytes of a message whose body is of layout 4 (db/body.go),
-- each chunk a zstd frame of its own.
CREATE TABLE raw_chunks (
	message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	seq        INTEGER NOT NULL,
	data       BLOB NOT NULL,
	PRIMARY KEY (message_id, seq)
) STRICT;

-- attachment_chunks: the bytes of an attachment whose content column is empty but whose
-- size is not (chunked = 1), uncompressed like content (attachments are mostly
-- compressed formats already).
CREATE TABLE attachment_chunks (
	attachment_id INTEGER NOT NULL REFERENCES attachments(id) ON DELETE CASCADE,
	seq           INTEGER NOT NULL,
	data          BLOB NOT NULL,
	PRIMARY KEY (attachment_id, seq)
) STRICT;
ALTER TABLE attachments ADD COLUMN chunked INTEGER NOT NULL DEFAULT 0;
