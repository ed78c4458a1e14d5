-- inboxd schema, version 14: the event log (extensions section 1). Every change that has an
-- event appends it here in its own transaction; webhooks, the live stream and waits read it
-- by seq, which the one writer assigns in commit order. An event names its message by row
-- and by its API ids, which outlive the row (a quarantined message deleted in review); what
-- it describes of one moment (a delivery record, bounced recipients, labels) is in detail.
-- Events go with their inbox, and after db.EventRetention; events_expired_through records
-- the newest seq retention dropped, so a stream resumed from before it is told so.
CREATE TABLE events (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a cursor stays meaningful
	event_id    TEXT NOT NULL,
	account_id  TEXT NOT NULL,
	inbox_id    INTEGER NOT NULL,                  -- inboxes.id
	type        TEXT NOT NULL,
	occurred_at INTEGER NOT NULL,                  -- unix milliseconds
	message_row INTEGER NOT NULL,                  -- messages.id (maybe deleted since)
	message_id  TEXT NOT NULL,
	thread_id   TEXT NOT NULL,
	detail      TEXT                               -- JSON {delivery, recipients, labels}, NULL when none
) STRICT;

-- A deleted inbox's events go with it, and a mailbox key's stream reads one inbox.
CREATE INDEX events_by_inbox ON events(inbox_id, seq);

INSERT INTO settings(name, value) VALUES ('events_expired_through', CAST('0' AS BLOB));
