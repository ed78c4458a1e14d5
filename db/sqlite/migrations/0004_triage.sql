-- inboxd schema, version 4: the durable triage queue.

-- One row per received message waiting for triage, written in the transaction that stores
-- the message (db.insertMessage) and deleted in the one that stores its result. A restart
-- resumes whatever is left. Quarantined messages wait here until released: the worker only
-- takes rows whose message is not quarantined.
--   next_at:        when the row is due (a provider that asked to retry later pushes it back)
--   attempts:       failed provider attempts so far (at most 5, API-NOTES section 8)
--   charged_period: the billing period ("YYYY-MM") a triage unit was spent in when the
--                   analysis started; NULL before. A failed analysis refunds that unit.
CREATE TABLE triage_queue (
	message_id     INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
	next_at        INTEGER NOT NULL,
	attempts       INTEGER NOT NULL DEFAULT 0,
	charged_period TEXT,
	created_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX triage_queue_due ON triage_queue(next_at, message_id);
