// Package events follows the durable event log (db.EventLog) for the readers inside one
// process: the live event streams and the waits for mail (extensions sections 4 and 5),
// and the webhook worker's payloads (Hub.Payloads: what the hub rendered for a stream is
// posted as it is, not read back and encoded again).
//
// One Hub per process tails the log from its end: it wakes on the store's commit signal,
// reads what was appended in pages, renders each payload once, keeps the most recent in a
// bounded ring, and wakes only the subscribers of the accounts concerned. An idle
// subscriber costs a channel and a map entry: no goroutine of the hub's, no timer, no
// query. A subscriber whose cursor is older than the ring reads the store itself until it
// reaches the ring. The hub holds nothing another process would need: all of it is
// derived from the store, which stays the truth.
package events
