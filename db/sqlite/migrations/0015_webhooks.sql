-- inboxd schema, version 15: webhooks and the durable queue of their deliveries (extensions
-- sections 2 and 3). A delivery is queued in the transaction that appends its event, for
-- each enabled webhook that wants it, so its rows are exact: a webhook disabled or created
-- later has none for that event. A delivery goes with its webhook and with its event (the
-- inbox deleted, retention), by the foreign keys.
CREATE TABLE webhooks (
	id          INTEGER PRIMARY KEY,
	uuid        TEXT NOT NULL UNIQUE,
	account_id  TEXT NOT NULL,
	url         TEXT NOT NULL,
	event_types TEXT NOT NULL,           -- JSON array of types as given, [] for every type
	inbox_ids   TEXT NOT NULL,           -- JSON array of inbox ids as shown, [] for every inbox
	inbox_rows  TEXT NOT NULL,           -- JSON array of their inboxes.id, what events match on
	description TEXT NOT NULL,
	enabled     INTEGER NOT NULL,
	secret      TEXT NOT NULL,
	created_at  INTEGER NOT NULL,        -- unix milliseconds
	updated_at  INTEGER NOT NULL
) STRICT;

-- Every recorded event reads its account's enabled webhooks: one probe when it has none.
CREATE INDEX webhooks_by_account ON webhooks(account_id, enabled);

CREATE TABLE webhook_deliveries (
	id              INTEGER PRIMARY KEY,
	webhook_id      INTEGER NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
	event_seq       INTEGER NOT NULL REFERENCES events(seq) ON DELETE CASCADE,
	status          TEXT NOT NULL,       -- pending, delivered, failed
	attempt         INTEGER NOT NULL DEFAULT 0,
	response_status INTEGER,
	error           TEXT,
	created_at      INTEGER NOT NULL,    -- unix milliseconds
	last_attempt_at INTEGER,
	next_attempt_at INTEGER,             -- when pending: due then
	delivered_at    INTEGER,
	claimed_until   INTEGER NOT NULL DEFAULT 0, -- a worker's lease; claimable again after it
	claim           TEXT                 -- the lease's token, checked when the attempt is recorded
) STRICT;

-- The worker claims pending rows by due time.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
-- listWebhookDeliveries, newest first.
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries(webhook_id, id);
-- The cascade from events (retention, a deleted inbox).
CREATE INDEX webhook_deliveries_by_event ON webhook_deliveries(event_seq);
