-- inboxd schema, version 19: drops webhook_deliveries_due. Since version 16 every query of
-- the pending queue reads webhook_deliveries_pending (each webhook's queue in due order:
-- the claim's pick and front, the next due time, the backlog's count), and a lease is
-- written by the row's id, so the older index was only kept up to date: one more index
-- entry written with every delivery queued and removed with every outcome.
-- (PostgreSQL keeps its copy: its claim first asks whether any delivery is due at all,
-- across webhooks, which that index answers without reading a webhook's backlog.)
DROP INDEX webhook_deliveries_due;
