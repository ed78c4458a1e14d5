-- inboxd schema, version 1. Times are integer milliseconds since the Unix epoch (UTC).

-- Secrets the server derives signatures from (page tokens, download URLs). Generated once,
-- so tokens and links survive a restart.
CREATE TABLE settings (
	name  TEXT PRIMARY KEY,
	value BLOB NOT NULL
) STRICT;

CREATE TABLE accounts (
	id          TEXT PRIMARY KEY,
	plan        TEXT NOT NULL,           -- free | developer | team | exempt
	disabled    INTEGER NOT NULL DEFAULT 0,
	inbox_quota INTEGER,                 -- operator quota; NULL means none
	created_at  INTEGER NOT NULL
) STRICT;

-- Domains an account may create inboxes on, besides the server's default domain.
CREATE TABLE account_domains (
	domain     TEXT PRIMARY KEY,
	account_id TEXT NOT NULL REFERENCES accounts(id)
) STRICT;

-- Metered units spent per account and billing period (period = "YYYY-MM", UTC).
CREATE TABLE usage (
	account_id TEXT NOT NULL REFERENCES accounts(id),
	period     TEXT NOT NULL,
	feature    TEXT NOT NULL,            -- sends | triage
	used       INTEGER NOT NULL,
	PRIMARY KEY (account_id, period, feature)
) STRICT;

CREATE TABLE inboxes (
	id              INTEGER PRIMARY KEY,
	uuid            TEXT NOT NULL UNIQUE,
	account_id      TEXT NOT NULL REFERENCES accounts(id),
	address         TEXT NOT NULL UNIQUE,  -- kept after retirement so the address is never reused
	display_name    TEXT,
	grp             TEXT,
	delivery_status TEXT NOT NULL,         -- pending | ready
	setup_available INTEGER NOT NULL,
	created_at      INTEGER NOT NULL,
	retired_at      INTEGER
) STRICT;
CREATE INDEX inboxes_by_account ON inboxes(account_id, created_at, id) WHERE retired_at IS NULL;
CREATE INDEX inboxes_by_group ON inboxes(account_id, grp, created_at, id) WHERE retired_at IS NULL;

CREATE TABLE keys (
	id           INTEGER PRIMARY KEY,
	account_id   TEXT NOT NULL REFERENCES accounts(id),
	kind         TEXT NOT NULL,          -- account | mailbox
	hash         BLOB NOT NULL UNIQUE,   -- SHA-256 of the whole token; the token itself is never stored
	prefix       TEXT NOT NULL,          -- first 12 characters, for display
	scopes       TEXT NOT NULL,          -- space separated
	inbox_id     INTEGER REFERENCES inboxes(id),
	expires_at   INTEGER,
	revoked_at   INTEGER,
	created_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE threads (
	id               INTEGER PRIMARY KEY,
	uuid             TEXT NOT NULL UNIQUE,
	inbox_id         INTEGER NOT NULL REFERENCES inboxes(id),
	-- Aggregates, recomputed from the thread's messages whenever one of them changes.
	last_ts          INTEGER NOT NULL DEFAULT 0,
	last_message     INTEGER,            -- messages.id of the latest message (ts, id)
	message_count    INTEGER NOT NULL DEFAULT 0,
	attachment_count INTEGER NOT NULL DEFAULT 0,
	received_ts      INTEGER,
	sent_ts          INTEGER,
	all_trashed      INTEGER NOT NULL DEFAULT 0,
	quarantined      INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX threads_by_activity ON threads(inbox_id, last_ts DESC, id DESC);

CREATE TABLE messages (
	id               INTEGER PRIMARY KEY,
	uuid             TEXT NOT NULL UNIQUE,
	inbox_id         INTEGER NOT NULL REFERENCES inboxes(id),
	thread_id        INTEGER NOT NULL REFERENCES threads(id),
	message_id       TEXT NOT NULL,      -- RFC 5322 Message-ID with brackets
	direction        TEXT NOT NULL,      -- received | sent
	ts               INTEGER NOT NULL,
	from_addr        TEXT NOT NULL,
	to_addrs         TEXT NOT NULL,      -- JSON arrays
	cc_addrs         TEXT NOT NULL,
	bcc_addrs        TEXT NOT NULL,
	reply_to         TEXT NOT NULL,
	subject          TEXT NOT NULL,
	preview          TEXT NOT NULL,
	body_text        TEXT NOT NULL,
	body_html        TEXT NOT NULL,
	in_reply_to      TEXT NOT NULL,
	refs             TEXT NOT NULL,      -- JSON array
	attachment_count INTEGER NOT NULL,
	quarantined      INTEGER NOT NULL,
	triage           TEXT,               -- JSON Triage; NULL when absent
	-- Copies of the complete triage result that list filters match on.
	tri_category     TEXT,
	tri_reply        TEXT,               -- yes | no | uncertain
	tri_urgency      TEXT,
	protection       TEXT,               -- JSON Protection; NULL when not scanned
	delivery         TEXT,               -- JSON Delivery; sent mail only
	raw              BLOB,               -- the RFC 5322 bytes, when known
	UNIQUE (inbox_id, message_id)
) STRICT;
CREATE INDEX messages_by_time ON messages(inbox_id, ts DESC, id DESC);
CREATE INDEX messages_by_thread ON messages(thread_id, ts, id);
CREATE INDEX messages_by_category ON messages(inbox_id, tri_category, ts DESC, id DESC) WHERE tri_category IS NOT NULL;
CREATE INDEX messages_by_reply ON messages(inbox_id, tri_reply, ts DESC, id DESC) WHERE tri_reply IS NOT NULL;
CREATE INDEX messages_by_urgency ON messages(inbox_id, tri_urgency, ts DESC, id DESC) WHERE tri_urgency IS NOT NULL;

CREATE TABLE message_labels (
	message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	label      TEXT NOT NULL,
	PRIMARY KEY (message_id, label)
) WITHOUT ROWID, STRICT;
CREATE INDEX message_labels_by_label ON message_labels(label, message_id);

CREATE TABLE attachments (
	id           INTEGER PRIMARY KEY,
	uuid         TEXT NOT NULL UNIQUE,
	message_id   INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	position     INTEGER NOT NULL,
	filename     TEXT NOT NULL,
	content_type TEXT NOT NULL,
	size         INTEGER NOT NULL,
	content      BLOB NOT NULL
) STRICT;
CREATE INDEX attachments_by_message ON attachments(message_id, position);

-- Idempotency records of send and reply, kept for the life of the inbox.
CREATE TABLE sends (
	inbox_id    INTEGER NOT NULL REFERENCES inboxes(id),
	idem_key    TEXT NOT NULL,
	fingerprint BLOB NOT NULL,
	message_id  TEXT NOT NULL,
	thread_id   TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	PRIMARY KEY (inbox_id, idem_key)
) STRICT;
CREATE INDEX sends_by_time ON sends(inbox_id, created_at);

-- The durable outbound queue: one row per (sent message, recipient) until it reaches a
-- terminal state. state: ready (to be tried at next_at) | parked (no transport for it yet).
CREATE TABLE outbound (
	id         INTEGER PRIMARY KEY,
	message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
	recipient  TEXT NOT NULL,
	state      TEXT NOT NULL,
	attempts   INTEGER NOT NULL DEFAULT 0,
	next_at    INTEGER NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX outbound_ready ON outbound(state, next_at);
