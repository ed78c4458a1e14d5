-- inboxd schema, version 5: protection verdicts and the quarantine review dashboard.

-- What stands behind a message's protection verdict, for the reviewer: per-signature DKIM
-- results, the DMARC policy, the spam rules that fired, why a scan was incomplete. JSON
-- (db.ProtectionDetail); never shown through the API.
CREATE TABLE protection_details (
	message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
	detail     TEXT NOT NULL
) STRICT;

-- The review queue: quarantined messages of every inbox, newest first.
CREATE INDEX messages_quarantined ON messages(ts DESC, id DESC) WHERE quarantined = 1;

-- Dashboard operators. The password is stored only as a bcrypt hash.
CREATE TABLE operators (
	name          TEXT PRIMARY KEY,
	password_hash BLOB NOT NULL,
	updated_at    INTEGER NOT NULL
) STRICT;

-- Every dashboard action (and refused attempt), newest last. Rows name the message by
-- value, so they outlive a deleted message or inbox.
CREATE TABLE audit_log (
	id         INTEGER PRIMARY KEY,
	at         INTEGER NOT NULL,
	actor      TEXT NOT NULL,           -- operator name, or "system"
	action     TEXT NOT NULL,           -- login | login_failed | login_limited | logout | view | release | release_refused | delete | password_set | password_generated
	account_id TEXT NOT NULL DEFAULT '',
	inbox      TEXT NOT NULL DEFAULT '',
	message_id TEXT NOT NULL DEFAULT '', -- RFC 5322 Message-ID
	detail     TEXT NOT NULL DEFAULT '',
	remote     TEXT NOT NULL DEFAULT ''  -- client address of the request
) STRICT;
