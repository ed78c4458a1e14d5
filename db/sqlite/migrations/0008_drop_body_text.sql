-- inboxd schema, version 8: no generated text column. SQLite computes the generated
-- columns of a STRICT table on every insert and update of a row, so messages.body_text
-- cost a decompression of the body on each of them; readers unpack body in Go instead
-- (db/body.go). Dropping a VIRTUAL column rewrites no rows.
ALTER TABLE messages DROP COLUMN body_text;
