// Package db is inboxd's model: the types the API shows and stores (Inbox, Message,
// Thread, Triage, Protection, keys, usage), the error type and its codes, the rules that
// need no storage, and the Store interfaces every storage implements (db/sqlite). It
// imports no database package.
package db

import (
	"context"
	"io"
	"time"
)

// Store is what inboxd keeps: accounts and their keys, inboxes, mail, the durable queues
// and the review's audit log. The embedded SQLite store (db/sqlite) implements it, and
// every implementation passes the same contract suite. The interfaces below list the
// error codes each method returns; besides those, any method may return unavailable
// (transient: storage cannot work now, such as a full disk), and anything that is not an
// *Error is a bug, answered as internal.
type Store interface {
	Units
	Accounts
	Inboxes
	Keys
	Messages
	Sends
	Outbound
	TriageQueue
	Quarantine
	DashboardLogins
	ChangeLog
	EventLog
	Webhooks
	TestDouble

	// Now is the store's clock: every time a rule compares with is read from it.
	Now() time.Time
	Close() error
}

// Accounts are the accounts, their plans, domains and metered usage (EnsureAccount makes
// them).
type Accounts interface {
	CountAccounts(ctx context.Context) (int, error)
	// Account returns one account. Errors: not_found.
	Account(ctx context.Context, id string) (*Account, error)
	AccountDomains(ctx context.Context, accountID string) ([]string, error)
	// DomainServed reports whether any account owns domain.
	DomainServed(ctx context.Context, domain string) (bool, error)
	// SetUsage sets the units an account has spent on a feature in the current period.
	SetUsage(ctx context.Context, accountID, feature string, used int64) error
	// GetUsage reports an account's plan, inbox count and remaining balances.
	GetUsage(ctx context.Context, accountID string) (*Usage, error)
	// SetAccountDisabled disables an account (its keys get access_denied) or enables it
	// again. Errors: not_found.
	SetAccountDisabled(ctx context.Context, accountID string, disabled bool) error
}

// Inboxes are the inboxes and their addresses, which are never reused (CreateInbox makes
// them).
type Inboxes interface {
	// InboxByAddress returns an inbox of the account by its address (any case).
	// Errors: not_found (unknown, or another account's), inbox_retired (deleted).
	InboxByAddress(ctx context.Context, accountID, address string) (*Inbox, error)
	// InboxByRowID returns an inbox by its internal id, retired or not. Errors: not_found.
	InboxByRowID(ctx context.Context, id int64) (*Inbox, error)
	// LocalInbox returns the inbox (of any account) at address, retired or not, for
	// delivery. Errors: not_found.
	LocalInbox(ctx context.Context, address string) (*Inbox, error)
	// ListInboxes returns one page of an account's live inboxes, oldest first.
	// Errors: invalid_argument (page token).
	ListInboxes(ctx context.Context, accountID string, group *string, limit int, pageToken string) ([]Inbox, string, error)
	// UpdateInboxGroup moves an inbox to a group, or out of any group when group is nil.
	UpdateInboxGroup(ctx context.Context, in *Inbox, group *string) (*Inbox, error)
	// FinishSetup completes delivery routing of a reserved inbox.
	FinishSetup(ctx context.Context, in *Inbox) (*Inbox, error)
	// DeleteInbox retires an inbox for good and deletes its mail, sends and queue rows.
	DeleteInbox(ctx context.Context, in *Inbox) error
}

// Keys are the API keys: account keys with scopes, and mailbox keys of one inbox
// (CreateKey makes them).
type Keys interface {
	// KeyOwner returns the account a token is a key of, or "" when there is no such key.
	KeyOwner(ctx context.Context, token string) (string, error)
	// ActiveAccountKeys counts an account's account keys that are neither revoked nor
	// expired.
	ActiveAccountKeys(ctx context.Context, accountID string) (int, error)
	// ListKeys returns the keys of an account ("": of every account), oldest first.
	ListKeys(ctx context.Context, accountID string) ([]KeyInfo, error)
	// RevokeKey revokes a key by its id (KeyIDOf) and returns it as revoked; revoking it
	// again changes nothing. Errors: invalid_argument (not a key id), not_found.
	RevokeKey(ctx context.Context, keyID string) (*KeyInfo, error)
	// Authenticate resolves a bearer token.
	// Errors: unauthorized (missing, malformed, unknown, expired or revoked key),
	// access_denied (the account is disabled).
	Authenticate(ctx context.Context, token string) (*Principal, error)
}

// AttachmentBody reads the bytes of one attachment; Seek serves Range requests.
type AttachmentBody interface {
	io.ReadSeeker
	Size() int64
}

// Messages are the mail of the inboxes, its threads, labels and attachments (Deliver and
// CommitSend store it).
type Messages interface {
	// ListMessages returns one page of an inbox's messages, newest first.
	// Errors: invalid_argument (page token).
	ListMessages(ctx context.Context, inboxID int64, f MessageFilter, limit int, pageToken string) ([]Message, string, error)
	// GetMessage returns one message with everything a full view may show.
	// Errors: not_found.
	GetMessage(ctx context.Context, inboxID int64, messageID string) (*Message, error)
	// MessageRaw returns the raw RFC 5322 bytes of message row. Errors: not_found.
	MessageRaw(ctx context.Context, messageRow int64) ([]byte, error)
	// ListThreads returns one page of an inbox's threads, newest activity first.
	// Errors: invalid_argument (page token).
	ListThreads(ctx context.Context, inboxID int64, f MessageFilter, limit int, pageToken string) ([]Thread, string, error)
	// GetThread returns a thread with its messages, oldest first; withBodies loads each
	// message's bodies. Errors: not_found, thread_too_large.
	GetThread(ctx context.Context, inboxID int64, threadID string, withBodies bool) (*Thread, error)
	// GetAttachment returns an attachment of a message of an inbox. Errors: not_found.
	GetAttachment(ctx context.Context, inboxID int64, messageID, attachmentID string) (*Attachment, error)
	// OpenAttachment returns an attachment named by the ids a download URL carries, and
	// its bytes. Errors: not_found (also from the body, when the message is deleted while
	// it is read).
	OpenAttachment(ctx context.Context, inboxUUID, messageUUID, attachmentID string) (*Attachment, AttachmentBody, error)
	// DownloadKey is the secret that signs attachment download URLs.
	DownloadKey() []byte
	// MessagesSince returns up to q.Limit summaries of an inbox's messages that pass f as
	// listMessages filters them (every label of f; trashed and quarantined mail only when
	// f's labels ask for it) and that q chooses, oldest first (timestamp, then row id).
	MessagesSince(ctx context.Context, inboxID int64, f MessageFilter, q SinceQuery) ([]Message, error)
}

// Sends are what sending leaves besides the messages (CommitSend stores those).
type Sends interface {
	// Suppressions returns the suppression list of an inbox, oldest first.
	Suppressions(ctx context.Context, inboxID int64) ([]Suppression, error)
}

// Outbound is the durable queue of deliveries of sent mail.
type Outbound interface {
	// ClaimOutbound returns up to limit due jobs, without their Raw bytes (MessageRaw).
	ClaimOutbound(ctx context.Context, limit int) ([]OutboundJob, error)
	// FinishOutbound records the outcome of a delivery attempt.
	FinishOutbound(ctx context.Context, job OutboundJob, o OutboundOutcome) error
	// FinishOutboundBatch records the outcomes of several attempts at once.
	FinishOutboundBatch(ctx context.Context, jobs []OutboundJob, outcomes []OutboundOutcome) error
	// RouteToRelay hands ready queue rows to the relay workers (ClaimRelay).
	RouteToRelay(ctx context.Context, ids []int64) error
	// ClaimRelay takes the relay job that is due first, with its Raw bytes; nil when none.
	ClaimRelay(ctx context.Context) (*OutboundJob, error)
	// MarkHandoff records, before the end-of-data dot goes to the relay, that the relay
	// may accept the message from now on; false when the row is no longer the worker's.
	MarkHandoff(ctx context.Context, jobID int64) (bool, error)
	// RecoverOutbound runs once before the outbound worker starts: it puts back what a
	// stopped worker held.
	RecoverOutbound(ctx context.Context, provider string) (OutboundRecovery, error)
	// OutboundCounts returns how many queue rows are in each state, every state named.
	OutboundCounts(ctx context.Context) (map[string]int, error)
	// ParkedCount returns how many queue rows wait for a transport.
	ParkedCount(ctx context.Context) (int64, error)
}

// TriageQueue is the durable queue of received mail waiting for analysis (ClaimTriage
// takes from it).
type TriageQueue interface {
	// TriageTexts fills the Text of claimed jobs (ClaimTriage), leaving out the messages
	// deleted since.
	TriageTexts(ctx context.Context, jobs []TriageJob) ([]TriageJob, error)
	// FinishTriage records outcomes of analyses, all at once, each only while its claim
	// holds (TriageOutcome), and returns the message rows of the outcomes it did not keep:
	// their analyses count for nothing (an attempt not counted, a unit not given back).
	FinishTriage(ctx context.Context, outcomes []TriageOutcome) (notKept []int64, err error)
	// TriageQueueLen reports how many messages wait for triage.
	TriageQueueLen(ctx context.Context) (int64, error)
	// NextTriageDue reports when the earliest queued message comes due, and false when
	// none waits.
	NextTriageDue(ctx context.Context) (time.Time, bool, error)
	// SentAny reports whether an inbox sent a message whose Message-ID is one of ids
	// (TriageSignals.RepliesToOurs: ids are a received message's ReplyParents).
	SentAny(ctx context.Context, inboxID int64, ids []string) (bool, error)
}

// Quarantine is held mail, its review and the audit log of the review dashboard.
type Quarantine interface {
	// ListQuarantined returns quarantined messages of live inboxes, newest first, and the
	// token of the next page.
	ListQuarantined(ctx context.Context, f QuarantineFilter) ([]QuarantineItem, string, error)
	// QuarantineCounts returns, per account and inbox, how many messages wait for review.
	QuarantineCounts(ctx context.Context) ([]QuarantineCount, error)
	// ReviewMessage loads one message that carries a protection verdict. Errors: not_found.
	ReviewMessage(ctx context.Context, uuid string) (*ReviewMessage, error)
	// Audit appends an entry to the audit log.
	Audit(ctx context.Context, e AuditEntry) error
	// AuditLog returns up to limit entries, newest first, older than entry id before (0:
	// the newest).
	AuditLog(ctx context.Context, limit int, before int64) ([]AuditEntry, error)
	// OperatorPasswordHash returns an operator's password hash, nil when none is stored.
	OperatorPasswordHash(ctx context.Context, name string) ([]byte, error)
	// SetOperatorPasswordHash stores an operator's password hash, noting how in the audit
	// log, and ends the operator's dashboard sessions: whoever logged in with the old
	// password is logged out.
	SetOperatorPasswordHash(ctx context.Context, name string, hash []byte, how string) error
}

// ChangeLog is what search indexes are fed from: the changes to searchable mail in commit
// order, and the searchable messages themselves. Several readers (an index per process)
// follow the log independently, each with a cursor of its own (AdvanceReader). The log
// keeps every change after the lowest cursor of the readers seen within ReaderRetention;
// a reader away longer stops holding it back, and finds on its return that the changes it
// needs are gone (its cursor below IndexQueueBounds' first): it rebuilds.
type ChangeLog interface {
	// SearchStoreID identifies this store to its search indexes.
	SearchStoreID(ctx context.Context) (string, error)
	// IndexQueueBounds returns the newest sequence number ever committed to the log (0
	// when none) and the oldest still kept (last+1 when none is).
	IndexQueueBounds(ctx context.Context) (last, first int64, err error)
	// IndexQueueLast returns the newest sequence number ever committed to the log.
	IndexQueueLast(ctx context.Context) (int64, error)
	// IndexChanges returns up to limit changes after seq, in order.
	IndexChanges(ctx context.Context, after int64, limit int) ([]IndexChange, error)
	// IndexInboxChanges returns up to limit changes after seq of one inbox, in order.
	IndexInboxChanges(ctx context.Context, inbox, after int64, limit int) ([]IndexChange, error)
	// AdvanceReader records that reader has applied, durably, every change through seq
	// (its cursor; a reader not seen before starts following the log there), then drops
	// the changes every reader seen within ReaderRetention has passed. A reader records
	// its cursor well within ReaderRetention, moved or not, to be seen.
	// Errors: invalid_argument (no reader id).
	AdvanceReader(ctx context.Context, reader string, through int64) error
	// IndexDocs returns the searchable messages among ids.
	IndexDocs(ctx context.Context, ids []int64) ([]IndexDoc, error)
	// ScanIndexDocs returns up to limit searchable messages with a row id above after, in
	// row id order.
	ScanIndexDocs(ctx context.Context, after int64, limit int) ([]IndexDoc, error)
	// CountIndexDocs returns how many messages a full index holds.
	CountIndexDocs(ctx context.Context) (int64, error)
	// MessagesByRowID returns the summaries of the given messages of an inbox that pass f,
	// in the order of ids.
	MessagesByRowID(ctx context.Context, inboxID int64, ids []int64, f MessageFilter) ([]Message, error)
	// EncodeSearchToken signs a search cursor for scope.
	EncodeSearchToken(scope string, c SearchCursor) string
	// DecodeSearchToken returns the cursor of a token issued for scope; "" is the first
	// page. Errors: invalid_argument (naming pageToken).
	DecodeSearchToken(token, scope string) (*SearchCursor, error)
}
