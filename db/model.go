package db

import (
	"encoding/json"
	"time"
)

// Time is a UTC instant that travels as ISO 8601 with milliseconds and Z, the wire form of
// every timestamp the API shows ("2026-09-20T18:07:46.000Z").
type Time struct{ time.Time }

// TimeFormat is the wire layout of Time.
const TimeFormat = "2006-01-02T15:04:05.000Z"

func (t Time) String() string { return t.UTC().Format(TimeFormat) }

func (t Time) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v.UTC()
	return nil
}

// Account owns inboxes and keys. Accounts are fully isolated from each other.
type Account struct {
	ID         string
	Plan       string // free | developer | team | exempt
	Disabled   bool
	InboxQuota *int // operator quota on live inboxes; nil means none
	CreatedAt  time.Time
}

// Inbox is an address that receives and sends mail. The JSON shape is the account-key view.
type Inbox struct {
	ID             int64   `json:"-"`
	UUID           string  `json:"-"`
	AccountID      string  `json:"-"`
	InboxID        string  `json:"inboxId"`
	Address        string  `json:"address"`
	DisplayName    string  `json:"displayName,omitempty"`
	CreatedAt      Time    `json:"createdAt"`
	Group          *string `json:"group"`
	DeliveryStatus string  `json:"deliveryStatus"`
	SetupAvailable bool    `json:"setupAvailable"`
	Retired        bool    `json:"-"`
}

// Delivery statuses of an inbox.
const (
	DeliveryPending = "pending"
	DeliveryReady   = "ready"
)

// Message directions.
const (
	Received = "received"
	Sent     = "sent"
)

// System labels (API-NOTES section 4).
const (
	LabelReceived    = "received"
	LabelSent        = "sent"
	LabelUnread      = "unread"
	LabelTrash       = "trash"
	LabelQuarantined = "quarantined"
	LabelBounced     = "bounced"
)

// AttachmentSummary describes one attachment; the bytes are never inline.
type AttachmentSummary struct {
	ID           int64  `json:"-"`
	AttachmentID string `json:"attachmentId"`
	Filename     string `json:"filename"`
	ContentType  string `json:"contentType"`
	Size         int64  `json:"size"`
}

// Message is one stored message. Server views choose which optional fields a client sees.
type Message struct {
	ID          int64               `json:"-"`
	UUID        string              `json:"-"`
	InboxRowID  int64               `json:"-"`
	ThreadRowID int64               `json:"-"`
	MessageID   string              `json:"messageId"`
	ThreadID    string              `json:"threadId"`
	InboxID     string              `json:"inboxId"`
	From        string              `json:"from"`
	To          []string            `json:"to"`
	Subject     string              `json:"subject"`
	Preview     string              `json:"preview"`
	Timestamp   Time                `json:"timestamp"`
	Labels      []string            `json:"labels"`
	Attachments []AttachmentSummary `json:"attachments"`
	Triage      *Triage             `json:"triage,omitempty"`
	Protection  *Protection         `json:"protection,omitempty"`
	// SenderAuthentication is set by the views (views.go), from Direction and Protection.
	SenderAuthentication string   `json:"senderAuthentication,omitempty"`
	Text                 *string  `json:"text,omitempty"`
	HTML                 *string  `json:"html,omitempty"`
	Cc                   []string `json:"-"`
	Bcc                  []string `json:"-"`
	ReplyTo              []string `json:"-"`
	// What a full view shows of Cc, Bcc and ReplyTo (FullView): always cc and replyTo, and
	// bcc on sent mail, as arrays even when empty, as the hosted service answers; a list
	// item shows none of them.
	CcView      *[]string `json:"cc,omitempty"`
	BccView     *[]string `json:"bcc,omitempty"`
	ReplyToView *[]string `json:"replyTo,omitempty"`
	Delivery    *Delivery `json:"delivery,omitempty"`

	Direction   string   `json:"-"`
	Quarantined bool     `json:"-"`
	InReplyTo   string   `json:"-"`
	References  []string `json:"-"`
	// Full bodies, always loaded by GetMessage; views copy them into Text/HTML.
	BodyText string `json:"-"`
	BodyHTML string `json:"-"`

	AttachmentCount int `json:"-"` // from the row: whether attachments need loading
}

// Thread is a conversation. Messages is filled by getThread only.
type Thread struct {
	ID                int64     `json:"-"`
	ThreadID          string    `json:"threadId"`
	InboxID           string    `json:"inboxId"`
	Subject           string    `json:"subject"`
	Preview           string    `json:"preview"`
	Timestamp         *Time     `json:"timestamp,omitempty"`
	Triage            *Triage   `json:"triage,omitempty"`
	MessageCount      int       `json:"messageCount"`
	Labels            []string  `json:"labels"`
	Senders           []string  `json:"senders"`
	Recipients        []string  `json:"recipients"`
	ReceivedTimestamp *Time     `json:"receivedTimestamp,omitempty"`
	SentTimestamp     *Time     `json:"sentTimestamp,omitempty"`
	LastMessageID     string    `json:"lastMessageId,omitempty"`
	AttachmentCount   int       `json:"attachmentCount"`
	Messages          []Message `json:"messages,omitempty"`

	Quarantined bool `json:"-"`
}

// Triage is the triage result of a received message, discriminated by Status.
type Triage struct {
	Status        string            `json:"status"` // pending | failed | complete
	Code          string            `json:"code,omitempty"`
	FailedAt      string            `json:"failedAt,omitempty"`
	Version       int               `json:"version,omitempty"`
	Model         string            `json:"model,omitempty"`
	AnalyzedAt    string            `json:"analyzedAt,omitempty"`
	DurationMs    *int64            `json:"durationMs,omitempty"`
	BodyTruncated *bool             `json:"bodyTruncated,omitempty"`
	Usage         *TriageUsage      `json:"usage,omitempty"`
	Category      *TriageCategory   `json:"category,omitempty"`
	NeedsReply    *TriageNeedsReply `json:"needsReply,omitempty"`
	Urgency       *TriageUrgency    `json:"urgency,omitempty"`
}

// Triage statuses.
const (
	TriagePending  = "pending"
	TriageFailed   = "failed"
	TriageComplete = "complete"
)

type TriageUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

type TriageCategory struct {
	Value         string             `json:"value"`
	Confidence    float64            `json:"confidence"`
	Probabilities map[string]float64 `json:"probabilities"`
}

type TriageNeedsReply struct {
	Value       *bool   `json:"value"`
	Probability float64 `json:"probability"`
}

type TriageUrgency struct {
	Value         *string            `json:"value"`
	Score         float64            `json:"score"`
	Confidence    float64            `json:"confidence"`
	Probabilities map[string]float64 `json:"probabilities"`
}

// ReplyFilter is the needsReply filter value a complete triage result matches: yes, no or
// uncertain. Absent, pending and failed triage match no filter, so they return "".
func (t *Triage) ReplyFilter() string {
	if t == nil || t.Status != TriageComplete || t.NeedsReply == nil {
		return ""
	}
	switch {
	case t.NeedsReply.Value == nil:
		return replyUncertain
	case *t.NeedsReply.Value:
		return replyYes
	default:
		return replyNo
	}
}

// Protection is the verdict of the inbound scan (spec 2.5).
type Protection struct {
	Status         string         `json:"status"` // clean | quarantined | released
	ScannedAt      string         `json:"scannedAt"`
	Authentication Authentication `json:"authentication"`
	Spam           Spam           `json:"spam"`
	Antivirus      Antivirus      `json:"antivirus"`
	Reasons        []string       `json:"reasons"`
	ReleasedAt     string         `json:"releasedAt,omitempty"`
	ReleasedBy     string         `json:"releasedBy,omitempty"`
}

// Protection statuses.
const (
	ProtectionClean       = "clean"
	ProtectionQuarantined = "quarantined"
	ProtectionReleased    = "released"
)

type Authentication struct {
	SPF            string   `json:"spf"`
	DKIM           string   `json:"dkim"`
	DMARC          string   `json:"dmarc"`
	SigningDomains []string `json:"signingDomains"`
}

type Spam struct {
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
}

type Antivirus struct {
	Status     string   `json:"status"` // clean | infected | unscannable
	Signatures []string `json:"signatures"`
}

// Delivery is the per-recipient delivery record of a sent message (spec 2.6). Version
// starts at 1 and grows with every change.
type Delivery struct {
	Version    int                 `json:"version"`
	SentAt     string              `json:"sentAt"`
	UpdatedAt  string              `json:"updatedAt"`
	Recipients []RecipientDelivery `json:"recipients"`
}

type RecipientDelivery struct {
	Recipient              string `json:"recipient"`
	Status                 string `json:"status"`
	UpdatedAt              string `json:"updatedAt"`
	Delivered              bool   `json:"delivered"`
	EventID                string `json:"eventId,omitempty"`
	Provider               string `json:"provider,omitempty"`
	Reason                 string `json:"reason,omitempty"`
	SMTPStatusCode         string `json:"smtpStatusCode,omitempty"`
	SMTPEnhancedStatusCode string `json:"smtpEnhancedStatusCode,omitempty"`
	DeliveryTimeMs         *int64 `json:"deliveryTimeMs,omitempty"`
	DeliveryEventAt        string `json:"deliveryEventAt,omitempty"`
}

// Recipient delivery statuses (API-NOTES section 10).
const (
	RecipientQueued     = "queued"
	RecipientAccepted   = "accepted"
	RecipientDelivered  = "delivered"
	RecipientDeferred   = "deferred"
	RecipientBounced    = "bounced"
	RecipientFailed     = "failed"
	RecipientRejected   = "rejected"
	RecipientComplained = "complained"
)

// Terminal reports whether a recipient status is final: a later event never replaces it.
func Terminal(status string) bool {
	switch status {
	case RecipientQueued, RecipientAccepted, RecipientDeferred:
		return false
	}
	return true
}
