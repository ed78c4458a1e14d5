-- inboxd schema, version 13: the readers of the change log. index_queue was trimmed by its
-- one consumer; several search indexes (one per process) now follow it, each with its own
-- cursor here, and a change is dropped only once every reader seen within the retention
-- (db.ReaderRetention) has passed it. An index that followed the queue before this version
-- records its cursor when it next opens.
CREATE TABLE change_readers (
	reader  TEXT PRIMARY KEY,  -- the reader's own id (search.ReaderID: one per index directory)
	seq     INTEGER NOT NULL,  -- the last change it has on disk
	seen_at INTEGER NOT NULL   -- when it last recorded its cursor, unix milliseconds
) STRICT;
