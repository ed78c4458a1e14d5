-- inboxd schema, version 9: the triage filters of listMessages read the time index. It
-- carries the triage values and the quarantine flag after its keys, so a page scans one
-- inbox's entries newest first and skips a non-matching message without reading its row.
-- The three partial indexes it replaces (one per filter) cost every delivery three more
-- index pages in the WAL, each on the edge of its own (inbox, value) run: ~30 KB of
-- writes and ~5% of the CPU per received message (scripts/smtpbench.sh), and ~90 bytes
-- of file per message. Measured on the bench's inbox of 100,000 messages: filtered pages
-- as fast as before (1.2-1.4 ms), one matching nothing scans the inbox's index entries
-- in ~10 ms.
DROP INDEX messages_by_category;
DROP INDEX messages_by_reply;
DROP INDEX messages_by_urgency;
DROP INDEX messages_by_time;
CREATE INDEX messages_by_time ON messages(inbox_id, ts DESC, id DESC, quarantined, tri_category, tri_reply, tri_urgency);
