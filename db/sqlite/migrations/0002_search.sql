-- The durable index queue of full-text search. Every change that affects what a search
-- returns (a new message, a label change, a triage result, a deleted inbox) writes a row
-- here in the same transaction, and the one indexer applies the rows in order. Rows are
-- deleted only once the index has them on disk, so a crash or kill -9 loses nothing: the
-- indexer resumes after the last sequence number the index recorded.
CREATE TABLE index_queue (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: never reused, so "older than the store" is decidable
	message INTEGER,                           -- messages.id; NULL when the whole inbox was deleted
	inbox   INTEGER NOT NULL,                  -- inboxes.id
	ts      INTEGER NOT NULL                   -- the message's ts (part of its index key); 0 for an inbox
) STRICT;

-- Identifies this database to its index, so an index directory that belongs to another
-- database (a copy, a restore) is rebuilt rather than trusted.
INSERT INTO settings(name, value) VALUES ('search_store_id', CAST(lower(hex(randomblob(16))) AS BLOB));
