-- inboxd PostgreSQL schema, version 3: the review dashboard's sessions and the counts of its
-- login throttle (SQLite's migration 0018), kept in the database rather than in each
-- process's memory, so that a session made through one process is one on every other,
-- logging out ends it on all of them, and a guesser gets no more tries by spreading its
-- guesses over processes.

-- A logged-in operator, by the SHA-256 of its cookie's token: never the token itself, nor
-- the form's CSRF token, which is derived from the cookie's. A session ends with its
-- operator (ON DELETE CASCADE; a new password deletes them too).
CREATE TABLE dashboard_sessions (
	token_hash bytea PRIMARY KEY,
	operator   text COLLATE "C" NOT NULL REFERENCES operators(name) ON DELETE CASCADE DEFERRABLE,
	expires_at bigint NOT NULL
);
CREATE INDEX dashboard_sessions_by_operator ON dashboard_sessions(operator, expires_at);

-- The login throttle's count of one client (an IPv4 address or an IPv6 /64). Each attempt
-- is counted by one upsert, so attempts at once through any processes each see their own
-- count.
CREATE TABLE login_tries (
	client     text COLLATE "C" PRIMARY KEY,
	pending    integer NOT NULL DEFAULT 0, -- attempts counted whose password is being checked
	failed     integer NOT NULL DEFAULT 0, -- wrong passwords since the last right one
	last_fail  bigint NOT NULL DEFAULT 0,  -- when the latest wrong one was counted; 0: none
	reported   integer NOT NULL DEFAULT 0, -- the mark of the latest refusal written to the audit log
	touched_at bigint NOT NULL             -- the latest attempt counted or finished
);
CREATE INDEX login_tries_by_touched ON login_tries(touched_at);
