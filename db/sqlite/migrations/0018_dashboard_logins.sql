-- inboxd schema, version 18: the review dashboard's sessions and the counts of its login
-- throttle, kept in the database rather than in a process's memory, so that they survive a
-- restart (and, on PostgreSQL, hold across processes).

-- A logged-in operator, by the SHA-256 of its cookie's token: never the token itself, nor
-- the form's CSRF token, which is derived from the cookie's. A session ends with its
-- operator (ON DELETE CASCADE; a new password deletes them too).
CREATE TABLE dashboard_sessions (
	token_hash BLOB PRIMARY KEY,
	operator   TEXT NOT NULL REFERENCES operators(name) ON DELETE CASCADE,
	expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX dashboard_sessions_by_operator ON dashboard_sessions(operator, expires_at);

-- The login throttle's count of one client (an IPv4 address or an IPv6 /64).
CREATE TABLE login_tries (
	client     TEXT PRIMARY KEY,
	pending    INTEGER NOT NULL DEFAULT 0, -- attempts counted whose password is being checked
	failed     INTEGER NOT NULL DEFAULT 0, -- wrong passwords since the last right one
	last_fail  INTEGER NOT NULL DEFAULT 0, -- when the latest wrong one was counted; 0: none
	reported   INTEGER NOT NULL DEFAULT 0, -- the mark of the latest refusal written to the audit log
	touched_at INTEGER NOT NULL            -- the latest attempt counted or finished
) STRICT;
CREATE INDEX login_tries_by_touched ON login_tries(touched_at);
