-- inboxd schema, version 6: bodies, raw MIME and verdicts compressed (DESIGN, "Storage and
-- speed"; db/body.go).

-- body holds the text, the HTML and the raw RFC 5322 bytes of a message, packed and
-- compressed together; it is the row's last stored column, so reading the list columns of a
-- row never touches its overflow pages. body_size is the characters of text and HTML, what
-- the getThread size limit counts. triage_z and protection_z are the triage and protection
-- JSON, compressed with a dictionary of their shapes (db/dict.go).
ALTER TABLE messages ADD COLUMN body_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN triage_z BLOB;
ALTER TABLE messages ADD COLUMN protection_z BLOB;
ALTER TABLE messages ADD COLUMN body BLOB;
UPDATE messages SET body = inboxd_pack_body(body_text, body_html, coalesce(raw, zeroblob(0))),
	body_size = length(body_text) + length(body_html),
	triage_z = inboxd_pack_json(triage), protection_z = inboxd_pack_json(protection);
ALTER TABLE messages DROP COLUMN body_text;
ALTER TABLE messages DROP COLUMN body_html;
ALTER TABLE messages DROP COLUMN raw;
ALTER TABLE messages DROP COLUMN triage;
ALTER TABLE messages DROP COLUMN protection;
-- The text as a column again, computed when read, for SQL that matches or indexes it (the
-- search indexer). SQLite computes it on every write of the row too, so it is the only one.
ALTER TABLE messages ADD COLUMN body_text TEXT GENERATED ALWAYS AS (inboxd_body_text(body)) VIRTUAL;

ALTER TABLE protection_details ADD COLUMN detail_z BLOB;
UPDATE protection_details SET detail_z = inboxd_pack_json(detail);
ALTER TABLE protection_details DROP COLUMN detail;
