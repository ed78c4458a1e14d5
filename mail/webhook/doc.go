// Package webhook delivers events to the webhooks of their accounts (extensions section 3):
// a Worker makes the deliveries of the store's durable queue, POSTs each event signed the
// Standard Webhooks way, and records the attempt: delivered on a 2xx within the timeout,
// else retried with exponential backoff for a day, then failed. Each webhook has a few
// attempts in flight at most, so a slow or dead endpoint delays no other one, and ingest
// never waits for a webhook: deliveries are rows queued with the event.
//
// A store that offers them (db.Webhooks.OfferHookDeliveries, SQLite) leases the deliveries
// its units of work queue to the worker in the same transaction, as far as the worker has
// room, and hands them over at commit: the worker makes them without claiming them. It
// claims the rest: retries as they come due, what it had no room for, what a worker that
// stopped or died left when its leases end. One claim leases a few rounds of a webhook's
// deliveries (claimAhead) and renders their payloads in one read, so a fast endpoint
// costs a write per several attempts, not one each.
package webhook
