package db

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"time"
)

// ECodeMalwareBlocked refuses the release of a message whose antivirus verdict is not
// clean (API-NOTES section 9).
const ECodeMalwareBlocked = "malware_blocked"

// ProtectionDetail is what stands behind a protection verdict, for the person reviewing
// it. It is stored beside the message and never shown through the API.
type ProtectionDetail struct {
	Internal bool         `json:"internal,omitempty"` // sent by an inbox of this server
	SPF      AuthDetail   `json:"spf"`
	DKIM     []DKIMDetail `json:"dkim,omitempty"` // one per verified signature
	// DKIMResult is the combined DKIM result (as in Protection.Authentication).
	DKIMResult  string     `json:"dkimResult,omitempty"`
	DKIMSkipped int        `json:"dkimSkipped,omitempty"` // signatures past the verification limit
	DMARC       AuthDetail `json:"dmarc"`
	// IgnoredAuthResults counts the Authentication-Results headers the message arrived
	// with: written by the sender or a hop before us, so never trusted.
	IgnoredAuthResults int        `json:"ignoredAuthResults,omitempty"`
	SpamEngine         string     `json:"spamEngine,omitempty"` // builtin | spamd
	SpamRules          []SpamRule `json:"spamRules,omitempty"`
	SpamdRequired      float64    `json:"spamdRequired,omitempty"` // spamd's own required score
	AVEngine           string     `json:"avEngine,omitempty"`      // builtin | builtin+clamd
	AVNotes            []string   `json:"avNotes,omitempty"`       // why a scan was incomplete
}

// AuthDetail explains one SPF or DMARC result. Result keeps the checker's own word
// (softfail, neutral) where the API's enum has none.
type AuthDetail struct {
	Result string `json:"result,omitempty"`
	Domain string `json:"domain,omitempty"`
	Policy string `json:"policy,omitempty"` // DMARC p=
	Note   string `json:"note,omitempty"`
}

// DKIMDetail is the result of one DKIM signature.
type DKIMDetail struct {
	Domain string `json:"domain,omitempty"`
	Result string `json:"result"`
	Note   string `json:"note,omitempty"`
}

// SpamRule is a spam rule that fired, with its points.
type SpamRule struct {
	Name        string  `json:"name"`
	Score       float64 `json:"score"`
	Description string  `json:"description,omitempty"`
}

// QuarantineItem is one message in the review queue.
type QuarantineItem struct {
	RowID           int64
	UUID            string
	AccountID       string
	Inbox           string
	MessageID       string
	From            string
	Subject         string
	Timestamp       time.Time
	Protection      Protection
	AttachmentCount int
}

// QuarantineFilter narrows the review queue. Before is the opaque cursor of the previous
// page ("" for the first).
type QuarantineFilter struct {
	AccountID string
	Inbox     string
	Before    string
	Limit     int
}

// QuarantineCount is the size of one inbox's review queue.
type QuarantineCount struct {
	AccountID string
	Inbox     string
	Count     int
}

// ReviewMessage is everything the reviewer sees of one scanned message.
type ReviewMessage struct {
	QuarantineItem
	Quarantined bool
	To, Cc      []string
	ReplyTo     []string
	Labels      []string
	Text, HTML  string
	Header      string // the raw header section as received (trace fields first)
	Detail      *ProtectionDetail
	Attachments []AttachmentSummary
}

// Actor is who does a dashboard action, for the audit log.
type Actor struct {
	Name   string // the operator
	Remote string // the client address of the request
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID        int64
	At        time.Time
	Actor     string
	Action    string
	AccountID string
	Inbox     string
	MessageID string
	Detail    string
	Remote    string
}

// ReleaseMessage lets a quarantined message through (API-NOTES section 9): protection
// status released with releasedAt and releasedBy, labels received+unread (quarantined
// and trash removed, the message's own labels kept), visible to lists and search again,
// and its pending triage eligible. It reports false when the message was not quarantined
// (releasing twice is a no-op). A message whose antivirus verdict is not clean is never
// released; the refusal is written to the audit log too.
//
// Errors: not_found, malware_blocked.
func ReleaseMessage(ctx context.Context, st Units, uuid string, by Actor) (bool, error) {
	var refused, released bool
	err := st.Update(ctx, func(tx Tx) error {
		refused, released = false, false
		it, held, err := tx.ScannedMessage(uuid)
		if err != nil || !held {
			return err
		}
		p := it.Protection
		entry := AuditEntry{Actor: by.Name, Remote: by.Remote, AccountID: it.AccountID, Inbox: it.Inbox, MessageID: it.MessageID}
		if p.Antivirus.Status != "clean" {
			refused = true
			entry.Action, entry.Detail = "release_refused", "antivirus status "+p.Antivirus.Status+": "+strings.Join(p.Antivirus.Signatures, ", ")
			return tx.Audit(entry)
		}
		p.Status, p.ReleasedAt, p.ReleasedBy = ProtectionReleased, Time{Time: tx.Now()}.String(), by.Name
		if err := tx.SetProtection(it.RowID, p, false); err != nil {
			return err
		}
		// Its pending triage needs nothing: the triage queue kept its row, and the worker
		// takes the rows of messages that are not quarantined.
		err = tx.Relabel(LabelTarget{Row: it.RowID}, []string{LabelReceived, LabelUnread}, []string{LabelQuarantined, LabelTrash})
		if err != nil {
			return err
		}
		if err := RecordEvent(tx, NewEvent{Type: EventReleased, MessageRow: it.RowID}); err != nil {
			return err
		}
		released = true
		entry.Action, entry.Detail = "release", "reasons: "+strings.Join(it.Protection.Reasons, ", ")
		return tx.Audit(entry)
	})
	if err != nil {
		return false, err
	}
	if refused {
		return false, Errorf(ECodeMalwareBlocked, "the antivirus verdict is not clean: a message with malware or an unscannable attachment cannot be released")
	}
	return released, nil
}

// DeleteQuarantined deletes a quarantined message for good (attachments, labels, queue
// rows) and writes it to the audit log.
//
// Errors: not_found (also for a message that is not quarantined).
func DeleteQuarantined(ctx context.Context, st Units, uuid string, by Actor) error {
	return st.Update(ctx, func(tx Tx) error {
		it, held, err := tx.ScannedMessage(uuid)
		if err != nil {
			return err
		}
		if !held {
			return Errorf(ECodeNotFound, "message %s is not in quarantine", uuid)
		}
		if err := tx.DeleteMessage(it.RowID); err != nil {
			return err
		}
		return tx.Audit(AuditEntry{Actor: by.Name, Remote: by.Remote, Action: "delete", AccountID: it.AccountID,
			Inbox: it.Inbox, MessageID: it.MessageID, Detail: "reasons: " + strings.Join(it.Protection.Reasons, ", ")})
	})
}

// MaxReviewHeader bounds the raw header shown to the reviewer: a store reads no more of a
// message's raw bytes than this for a review.
const MaxReviewHeader = 64 << 10

// HeaderSection returns the header part of raw RFC 5322 bytes, up to MaxReviewHeader
// bytes, with LF line ends: what the reviewer sees.
func HeaderSection(raw []byte) string {
	raw = raw[:min(len(raw), MaxReviewHeader)]
	end := len(raw)
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 {
		end = i
	}
	if i := bytes.Index(raw[:end], []byte("\n\n")); i >= 0 {
		end = i
	}
	return strings.ReplaceAll(string(raw[:end]), "\r\n", "\n")
}

// PageSize is how many items a page of the review queue holds: Limit, or 50 when it is
// not between 1 and 200.
func (f QuarantineFilter) PageSize() int {
	if f.Limit <= 0 || f.Limit > 200 {
		return 50
	}
	return f.Limit
}

// ReviewCursor returns where a page of the review queue starts: after the item with this
// timestamp (Unix milliseconds) and row, from Before; ok is false on the first page.
//
// Errors: invalid_argument (before).
func (f QuarantineFilter) ReviewCursor() (ts, row int64, ok bool, err error) {
	if f.Before == "" {
		return 0, 0, false, nil
	}
	tsS, rowS, _ := strings.Cut(f.Before, "-")
	ts, err1 := strconv.ParseInt(tsS, 10, 64)
	row, err2 := strconv.ParseInt(rowS, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, Errorf(ECodeInvalidArgument, "before: not a page cursor")
	}
	return ts, row, true, nil
}

// ReviewPage cuts items, read newest first with one more than size, to a page and returns
// the cursor of the next page ("" on the last).
func ReviewPage(items []QuarantineItem, size int) ([]QuarantineItem, string) {
	if len(items) <= size {
		return items, ""
	}
	items = items[:size]
	last := items[size-1]
	return items, strconv.FormatInt(last.Timestamp.UnixMilli(), 10) + "-" + strconv.FormatInt(last.RowID, 10)
}

// AuditPageSize is how many entries a page of the audit log holds: limit, or 100 when it
// is not between 1 and 500.
func AuditPageSize(limit int) int {
	if limit <= 0 || limit > 500 {
		return 100
	}
	return limit
}
