package db

import (
	"sort"
	"strconv"
	"strings"
	"time"
	// A drop-in encoding/json with cached codecs: list pages decode the triage,
	// protection and delivery of every row, which dominated their CPU time.
)

// NewMessage is a message to store: received mail after parsing and scanning, or a sent
// message after composing.
type NewMessage struct {
	InboxID              int64 // inbox row id
	MessageID            string
	Direction            string // Received | Sent
	From                 string
	To, Cc, Bcc, ReplyTo []string
	Subject              string
	Text, HTML           string
	Preview              string
	Timestamp            time.Time
	InReplyTo            string
	References           []string
	// ThreadCandidates are Message-IDs to thread onto, in header order (ThreadCandidates, threading.go);
	// the one appearing latest that matches a stored, non-quarantined message of the inbox wins.
	ThreadCandidates []string
	// ThreadID, when set, puts the message in that thread (a reply joins its original's).
	ThreadID    string
	Labels      []string
	Attachments []NewAttachment
	Triage      *Triage
	// QueueTriage puts received mail with pending triage on the triage queue (live mail;
	// fixtures keep the triage they chose).
	QueueTriage bool
	// ChargeTriage says Triage is an analysis made before the store (the built-in model
	// answers at once): it spends a triage unit of the inbox's account in the transaction
	// that stores the message, and when the allowance is spent the message is stored with
	// no triage at all, as a queued analysis would be (API-NOTES section 8).
	ChargeTriage bool
	// TriageSignals are what triage knows of received mail besides its words; a store
	// keeps them on the triage queue with the message (QueuesTriage).
	TriageSignals TriageSignals
	Protection    *Protection

	// ProtectionDetail explains the verdict to the quarantine reviewer (db/quarantine.go).
	ProtectionDetail *ProtectionDetail

	Delivery *Delivery
	// Raw is the message's RFC 5322 bytes; Trace, when set, is header fields stored in
	// front of them (the Received: field of the SMTP listener). Kept apart so that a large
	// message is never copied whole to put a line in front of it.
	Raw   []byte
	Trace string
}

// NewAttachment is the content of one attachment to store.
type NewAttachment struct {
	Filename    string
	ContentType string
	Content     []byte
}

// Stored identifies a stored message. Existed is true when the inbox already held a
// message with that Message-ID and nothing was written.
type Stored struct {
	RowID     int64
	MessageID string
	ThreadID  string
	Existed   bool
}

// InitialLabels returns the labels a new message starts with: the system labels its
// direction and quarantine imply, plus the extra ones, deduplicated and sorted. A
// quarantined message carries only `quarantined`.
func InitialLabels(direction string, quarantined bool, extra []string) []string {
	if quarantined {
		return []string{LabelQuarantined}
	}
	set := map[string]bool{}
	if direction == Sent {
		set[LabelSent] = true
	} else {
		set[LabelReceived] = true
		set[LabelUnread] = true
	}
	for _, l := range extra {
		if l != LabelQuarantined {
			set[l] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Quarantined reports whether the message is held by its protection verdict.
func (n *NewMessage) Quarantined() bool {
	return n.Protection != nil && n.Protection.Status == ProtectionQuarantined
}

// MessageFilter narrows a message or thread list. Triage filters match complete results
// only: absent, pending and failed triage never match.
type MessageFilter struct {
	Labels       []string // AND match
	Category     string
	NeedsReply   string // yes | no | uncertain
	Urgency      string
	IncludeTrash bool // threads only; messages include trash when Labels has it
}

// Has reports whether the filter asks for label.
func (f MessageFilter) Has(label string) bool {
	for _, l := range f.Labels {
		if l == label {
			return true
		}
	}
	return false
}

// HasTriage reports whether the filter matches on triage.
func (f MessageFilter) HasTriage() bool {
	return f.Category != "" || f.NeedsReply != "" || f.Urgency != ""
}

// Scope is what a page token of a list of kind over the filter is bound to (ListScope).
func (f MessageFilter) Scope(kind string, inboxID int64) string {
	labels := append([]string(nil), f.Labels...)
	sort.Strings(labels)
	return ListScope(kind, strconv.FormatInt(inboxID, 10), strings.Join(labels, "\x01"), f.Category, f.NeedsReply, f.Urgency,
		strconv.FormatBool(f.IncludeTrash))
}
