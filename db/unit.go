package db

import (
	"context"
	"time"
)

// A rule that must be atomic with the data it reads (a send's idempotency, rate and
// billing checks, say) runs as a unit of work: a function the store runs in one
// transaction, which reads and writes through Tx. The rule is plain Go in this package;
// the store provides the transaction and the primitives, and knows no rule.

// Units runs units of work.
type Units interface {
	// Update runs fn in one transaction, committed when fn returns nil; when fn returns
	// an error nothing of it stays. fn may run more than once (rolled back in between,
	// when a store shares one transaction among concurrent units), so it must set its
	// results afresh rather than add to them. fn makes no network call.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// Prepare does what storing m costs in CPU (compressing its bodies, say) before a
	// unit of work stores it (Tx.InsertMessage), so the work does not hold the store's
	// writer. Labels and Delivery are read when the message is inserted, and may change
	// in between.
	Prepare(m *NewMessage) Prepared
}

// Prepared is a message made ready to store by Units.Prepare.
type Prepared interface {
	// Message is the prepared message itself.
	Message() *NewMessage
}

// Tx is what a unit of work reads and writes. Its methods return the errors their
// comments name, and storage errors, which end the unit.
type Tx interface {
	// Now is the store's clock.
	Now() time.Time

	// AccountPlan returns the plan of an account. Errors: not_found.
	AccountPlan(accountID string) (string, error)
	// UsedUnits returns the units of feature an account spent in period.
	UsedUnits(accountID, feature, period string) (int64, error)
	// SpendUnit adds one unit of feature to what an account spent in period.
	SpendUnit(accountID, feature, period string) error

	// SendRecord returns the idempotency record of a send, nil when there is none.
	SendRecord(inboxID int64, key string) (*SendRecord, error)
	// SendsSince counts an inbox's sends after since, and returns when the oldest of them
	// was made.
	SendsSince(inboxID int64, since time.Time) (int, time.Time, error)
	// RecordSend stores the idempotency record of a send.
	RecordSend(inboxID int64, r SendRecord, at time.Time) error
	// Suppressed returns which of addrs are on an inbox's suppression list.
	Suppressed(inboxID int64, addrs []string) (map[string]bool, error)
	// EnqueueOutbound queues the delivery of message row to each recipient, due at once.
	EnqueueOutbound(messageRow int64, recipients []string, at time.Time) error

	// Isolated runs fn so that, when it fails, what it wrote is undone and the unit goes
	// on (a savepoint). It returns fn's error (a storage failure as unavailable).
	Isolated(fn func() error) error

	// InboxAccount returns the account of an inbox.
	InboxAccount(inboxID int64) (string, error)
	// StoredMessage returns the message of an inbox with a Message-ID, nil when none.
	StoredMessage(inboxID int64, messageID string) (*Stored, error)
	// InboxRetired reports whether an inbox is deleted, and keeps it from being deleted
	// until the unit ends: what the unit then stores in a live inbox is deleted with it.
	InboxRetired(inboxID int64) (bool, error)
	// ThreadByUUID returns the row of a thread of an inbox, and whether it exists.
	ThreadByUUID(inboxID int64, uuid string) (int64, bool, error)
	// ThreadsOf returns the threads of the stored, non-quarantined messages of an inbox
	// among the Message-IDs ids, by Message-ID.
	ThreadsOf(inboxID int64, ids []string) (map[string]ThreadRef, error)
	// NewThread makes an empty thread with uuid ("": the store picks one); a thread never
	// stays empty past the unit.
	NewThread(inboxID int64, uuid string) (ThreadRef, error)
	// WriteMessage writes a new message into thread, with its labels, attachments and raw
	// bytes, brings the thread's aggregates up to date and queues it for indexing (and
	// triage, when QueuesTriage); withTriage false stores it with no triage.
	WriteMessage(p Prepared, thread ThreadRef, withTriage bool) (Stored, error)

	// LabelTarget finds a message (by Message-ID) or a thread (by UUID) of an inbox, and
	// whether any message it reaches is quarantined.
	LabelTarget(inboxID int64, thread bool, id string) (LabelTarget, bool, error)
	// Relabel adds and removes labels on the messages t reaches.
	Relabel(t LabelTarget, add, remove []string) error
	// LabelsOf returns the labels of each message t reaches, by row.
	LabelsOf(t LabelTarget) (map[int64][]string, error)

	// ScannedMessage returns a message of a live inbox that carries a protection verdict,
	// by its UUID, and whether it is quarantined. Errors: not_found.
	ScannedMessage(uuid string) (*QuarantineItem, bool, error)
	// SetProtection replaces a message's protection verdict and whether it is held.
	SetProtection(messageRow int64, p Protection, held bool) error
	// DeleteMessage deletes a message for good, with what belongs to it.
	DeleteMessage(messageRow int64) error
	// Audit appends an entry to the audit log, at the unit's Now.
	Audit(e AuditEntry) error

	// InboxAt returns the inbox at an address (any account, retired or not), nil when
	// none.
	InboxAt(address string) (*Inbox, error)
	// DomainOwner returns the account a domain belongs to, "" when none.
	DomainOwner(domain string) (string, error)
	// InboxAllowance reads what decides whether an account may have one more inbox.
	// Errors: not_found (no such account).
	InboxAllowance(accountID string) (InboxAllowance, error)
	// InsertInbox stores a new inbox and returns its row id.
	InsertInbox(in *Inbox) (int64, error)
	// SetDeliveryStatus sets an inbox's delivery status.
	SetDeliveryStatus(inboxID int64, status string) error

	// UpsertAccount creates an account, or sets the plan of the one with its id.
	UpsertAccount(a Account) error
	// AccountExists reports whether an account exists.
	AccountExists(accountID string) (bool, error)
	// AttachDomain gives a domain no account has to an account.
	AttachDomain(domain, accountID string) error

	// KeyOwner returns the account a token is a key of, "" when none.
	KeyOwner(token string) (string, error)
	// LiveInboxOf returns the row of the account's live inbox at address, and whether
	// there is one.
	LiveInboxOf(accountID, address string) (int64, bool, error)
	// RevokeMailboxKeys revokes every mailbox key of an inbox, at the unit's Now.
	RevokeMailboxKeys(inboxID int64) error
	// ActiveAccountKeys counts an account's account keys that are neither revoked nor
	// expired at the unit's Now.
	ActiveAccountKeys(accountID string) (int, error)
	// InsertKey stores a new key, created at the unit's Now; inboxID is the inbox of a
	// mailbox key, 0 for an account key.
	InsertKey(k NewKey, inboxID int64) error

	// AppendEvent appends an event to the log and returns its seq, account and inbox.
	AppendEvent(e NewEvent) (AppendedEvent, error)
	// WebhookTx reads and writes webhooks and queues their deliveries (webhooks.go).
	WebhookTx

	// DueTriage returns up to limit queued messages due at now and not quarantined,
	// leaving out the rows in skip, in the order they came due.
	DueTriage(now time.Time, limit int, skip []int64) ([]QueuedTriage, error)
	// MarkTriageCharged records that a queued message's analysis is paid for in period.
	MarkTriageCharged(messageRow int64, period string) error
	// SkipTriage takes a message off the queue with no triage at all.
	SkipTriage(messageRow int64) error
}

// SendRecord is what makes a send idempotent: the fingerprint of its request and what it
// answered.
type SendRecord struct {
	Key         string
	Fingerprint []byte
	Result      SendResult
}

// NextGroup removes up to max items from the front of queue and returns them: the group
// a store's committer runs next, in order of arrival; none when the queue is empty. (Its
// clear lets the items taken be collected once done.)
func NextGroup[T any](queue *[]T, max int) []T {
	n := min(len(*queue), max)
	if n == 0 {
		return nil
	}
	group := make([]T, n)
	copy(group, *queue)
	rest := copy(*queue, (*queue)[n:])
	clear((*queue)[rest:])
	*queue = (*queue)[:rest]
	return group
}
