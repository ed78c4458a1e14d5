// Package mail is everything that understands email: MIME parsing and composing,
// threading by headers, the receive pipeline (parse, protect, thread, store, triage),
// send and reply (compose, store, deliver) and outbound delivery from the durable queue
// to local inboxes, an SMTP relay or the sink. Service runs these rules against a
// db.Store; mail/protect gives received mail its verdict and mail/triage classifies it.
package mail
