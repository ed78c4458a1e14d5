-- inboxd schema, version 16: each webhook's pending deliveries in the order they come due,
-- so a claim reads the front of each webhook's queue instead of ranking every pending
-- delivery (an endpoint down for hours can have thousands waiting).
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(webhook_id, next_attempt_at, id) WHERE status = 'pending';
