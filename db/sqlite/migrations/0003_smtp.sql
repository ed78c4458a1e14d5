-- inboxd schema, version 3: real mail in and out (SMTP listener, relay, suppression).

-- Per-inbox suppression list (API-NOTES section 10): a recipient that hard-bounced is kept
-- here, and later sends from the inbox to it are recorded `rejected` instead of queued.
CREATE TABLE suppressions (
	inbox_id      INTEGER NOT NULL REFERENCES inboxes(id),
	address       TEXT NOT NULL,          -- lowercased
	reason        TEXT NOT NULL,
	smtp_code     TEXT NOT NULL DEFAULT '',
	smtp_enhanced TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	PRIMARY KEY (inbox_id, address)
) WITHOUT ROWID, STRICT;

-- Deleting an inbox purges its suppressions (API-NOTES section 3, deleteInbox).
CREATE TRIGGER suppressions_purge AFTER UPDATE OF retired_at ON inboxes
WHEN NEW.retired_at IS NOT NULL
BEGIN
	DELETE FROM suppressions WHERE inbox_id = NEW.id;
END;

-- Outbound queue states now: ready | attempting | handoff (| parked, from version 1 only).
--   attempting: a relay worker owns the row and is talking to the relay; the end-of-data
--               dot has not been sent, so the relay cannot have accepted the message.
--   handoff:    the whole message was written and the dot is about to go or has gone;
--               the relay may have accepted it.
-- Recovery at start: attempting -> ready (resent: the relay dropped the unfinished
-- transaction), handoff -> not resent, the recipient is recorded `accepted` with the reason
-- (a resend could deliver it twice), parked -> ready (a transport always exists now).
ALTER TABLE outbound ADD COLUMN state_at INTEGER;
