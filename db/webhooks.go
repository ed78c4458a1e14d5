package db

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Webhooks (extensions sections 2 and 3): an account's endpoints that receive its events.
// A webhook's deliveries are queued in the unit of work that records the event
// (RecordEvent), so a webhook disabled or created later never gets an event of its off
// time, and a committed event always has its deliveries.

// Webhook limits of the contract.
const (
	MaxWebhooks        = 20   // per account
	MaxWebhookURL      = 2048 // characters
	MaxWebhookInboxes  = 100
	MaxWebhookDescribe = 200 // characters of description
	// WebhookSecretPrefix starts every secret, as Standard Webhooks secrets do.
	WebhookSecretPrefix = "whsec_"
	webhookSecretBytes  = 24
)

// Delivery statuses of a webhook delivery.
const (
	HookPending   = "pending"
	HookDelivered = "delivered"
	HookFailed    = "failed"
)

// Webhook is an endpoint of an account, as the API shows it.
type Webhook struct {
	Row       int64  `json:"-"`
	AccountID string `json:"-"`
	WebhookID string `json:"webhookId"`
	URL       string `json:"url"`
	// EventTypes and InboxIDs are as given; empty means every type, every inbox.
	EventTypes []string `json:"eventTypes"`
	InboxIDs   []string `json:"inboxIds"`
	// InboxRows are the rows of InboxIDs, which the fan-out matches events against.
	InboxRows   []int64 `json:"-"`
	Description string  `json:"description"`
	Enabled     bool    `json:"enabled"`
	Secret      string  `json:"secret"`
	CreatedAt   Time    `json:"createdAt"`
	UpdatedAt   Time    `json:"updatedAt"`
}

// Wants reports whether the webhook takes an event of type t in inbox row inbox.
func (w *Webhook) Wants(t string, inbox int64) bool {
	return (len(w.EventTypes) == 0 || containsString(w.EventTypes, t)) &&
		(len(w.InboxRows) == 0 || containsRow(w.InboxRows, inbox))
}

// HookDelivery is one event's delivery to one webhook, as listWebhookDeliveries shows it.
type HookDelivery struct {
	Row            int64  `json:"-"`
	EventID        string `json:"eventId"`
	Type           string `json:"type"`
	Attempt        int    `json:"attempt"`
	Status         string `json:"status"`
	ResponseStatus *int   `json:"responseStatus,omitempty"`
	Error          string `json:"error,omitempty"`
	CreatedAt      Time   `json:"createdAt"`
	LastAttemptAt  *Time  `json:"lastAttemptAt,omitempty"`
	NextAttemptAt  *Time  `json:"nextAttemptAt,omitempty"`
	DeliveredAt    *Time  `json:"deliveredAt,omitempty"`
}

// NewWebhook is a webhook to create.
type NewWebhook struct {
	AccountID   string
	URL         string
	EventTypes  []string
	InboxIDs    []string
	Description string
	// Secret is a fixture's fixed secret; "" makes a random one. A webhook of the account
	// with this secret already is kept as it is and returned: loading a fixture twice
	// changes nothing.
	Secret string
	// AllowHTTP allows http:// to any host (serve --webhook-allow-http).
	AllowHTTP bool
}

// WebhookUpdate changes a webhook: nil fields stay as they are.
type WebhookUpdate struct {
	URL         *string
	EventTypes  *[]string
	InboxIDs    *[]string
	Description *string
	Enabled     *bool
	AllowHTTP   bool
}

// NewWebhookSecret returns a fresh secret: the prefix and the standard base64 of 24 random
// bytes.
func NewWebhookSecret() string {
	b := make([]byte, webhookSecretBytes)
	rand.Read(b) // never fails (crypto/rand: it crashes the program instead)
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// WebhookKey returns the HMAC key of a secret: its bytes after the prefix, base64-decoded.
// Errors: invalid_argument (naming secret).
func WebhookKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, WebhookSecretPrefix)
	key, err := base64.StdEncoding.DecodeString(rest)
	if !ok || err != nil || len(key) < webhookSecretBytes {
		return nil, Errorf(ECodeInvalidArgument, "secret: must be whsec_ followed by the standard base64 of at least %d bytes", webhookSecretBytes)
	}
	return key, nil
}

// CheckWebhookURL applies the contract's URL rules: an absolute https:// URL, or http://
// to a loopback host (any host when allowHTTP); no user info, no fragment.
// Errors: invalid_argument (naming url).
func CheckWebhookURL(raw string, allowHTTP bool) error {
	bad := func(why string) error { return Errorf(ECodeInvalidArgument, "url: %s", why) }
	if utf8.RuneCountInString(raw) > MaxWebhookURL {
		return bad("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return bad("must be an absolute https:// URL")
	}
	switch {
	case !validPort(u.Port()):
		return bad("the port must be a number from 1 to 65535")
	case u.User != nil:
		return bad("must not carry a user name or password")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not have a fragment")
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return bad("must be an https:// URL")
	case allowHTTP || isLoopbackHost(u.Hostname()):
		return nil
	}
	return bad("http:// is allowed only to localhost, 127.0.0.0/8 or [::1] (serve --webhook-allow-http allows any host)")
}

// validPort reports whether a URL's port is absent or one a connection can be made to;
// url.Parse takes any digits.
func validPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

func isLoopbackHost(host string) bool {
	// Not "localhost.": Go's resolver asks DNS for that absolute name instead of the
	// hosts file, so it may reach any host, or none.
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && net.IP(ip.AsSlice()).IsLoopback()
}

// CreateWebhook makes a webhook of an account, enabled.
// Errors: invalid_argument (url, eventTypes, inboxIds, description, secret),
// webhook_limit (the account has MaxWebhooks).
func CreateWebhook(ctx context.Context, st Units, n NewWebhook) (*Webhook, error) {
	secret := n.Secret
	if secret == "" {
		secret = NewWebhookSecret()
	} else if _, err := WebhookKey(secret); err != nil {
		return nil, err
	}
	if err := checkWebhookFields(n.URL, n.EventTypes, n.Description, n.AllowHTTP); err != nil {
		return nil, err
	}
	var out *Webhook
	err := st.Update(ctx, func(tx Tx) error {
		if n.Secret != "" {
			existing, err := tx.WebhookWithSecret(n.AccountID, n.Secret)
			if err != nil || existing != nil {
				out = existing
				return err
			}
		}
		count, err := tx.CountWebhooks(n.AccountID)
		if err != nil {
			return err
		}
		if count >= MaxWebhooks {
			return Errorf(ECodeWebhookLimit, "the account has %d webhooks, the most it may have; delete one first", MaxWebhooks)
		}
		now := Time{Time: tx.Now().Truncate(time.Millisecond)}
		w := &Webhook{AccountID: n.AccountID, WebhookID: newUUID(), URL: n.URL, EventTypes: nonNil(n.EventTypes),
			Description: n.Description, Enabled: true, Secret: secret, CreatedAt: now, UpdatedAt: now}
		if w.InboxIDs, w.InboxRows, err = webhookInboxes(tx, n.AccountID, n.InboxIDs); err != nil {
			return err
		}
		w.Row, err = tx.InsertWebhook(w)
		out = w
		return err
	})
	return out, err
}

// UpdateWebhook changes a webhook of an account. Disabling it stops its deliveries
// (WebhookClaim passes over a disabled webhook's); events recorded while it is disabled
// are never queued for it.
// Errors: not_found, invalid_argument (as CreateWebhook; also an update that changes
// nothing).
func UpdateWebhook(ctx context.Context, st Units, accountID, webhookID string, u WebhookUpdate) (*Webhook, error) {
	if u.URL == nil && u.EventTypes == nil && u.InboxIDs == nil && u.Description == nil && u.Enabled == nil {
		return nil, Errorf(ECodeInvalidArgument, "body: give at least one of url, eventTypes, inboxIds, description, enabled")
	}
	var out *Webhook
	err := st.Update(ctx, func(tx Tx) error {
		w, err := tx.WebhookOf(accountID, webhookID)
		if err != nil {
			return err
		}
		if err := applyWebhookUpdate(tx, w, u); err != nil {
			return err
		}
		w.UpdatedAt = Time{Time: tx.Now().Truncate(time.Millisecond)}
		out = w
		return tx.SaveWebhook(w)
	})
	return out, err
}

func applyWebhookUpdate(tx Tx, w *Webhook, u WebhookUpdate) error {
	// Only a URL the update gives is checked: a webhook a fixture (or a server run with
	// --webhook-allow-http) made at http:// to another host can still be disabled or
	// described by a server without that flag.
	if u.URL != nil {
		if err := CheckWebhookURL(*u.URL, u.AllowHTTP); err != nil {
			return err
		}
		w.URL = *u.URL
	}
	if u.EventTypes != nil {
		w.EventTypes = nonNil(*u.EventTypes)
	}
	if u.Description != nil {
		w.Description = *u.Description
	}
	if u.Enabled != nil {
		w.Enabled = *u.Enabled
	}
	if err := checkWebhookChoices(w.EventTypes, w.Description); err != nil {
		return err
	}
	if u.InboxIDs == nil {
		return nil
	}
	var err error
	w.InboxIDs, w.InboxRows, err = webhookInboxes(tx, w.AccountID, *u.InboxIDs)
	return err
}

// DeleteWebhook deletes a webhook of an account with its deliveries, pending or not.
// Errors: not_found.
func DeleteWebhook(ctx context.Context, st Units, accountID, webhookID string) error {
	return st.Update(ctx, func(tx Tx) error {
		w, err := tx.WebhookOf(accountID, webhookID)
		if err != nil {
			return err
		}
		return tx.DeleteWebhook(w.Row)
	})
}

// checkWebhookFields checks what needs no storage. The request schema checks the same
// for the API; fixtures come here alone.
func checkWebhookFields(rawURL string, types []string, description string, allowHTTP bool) error {
	if err := CheckWebhookURL(rawURL, allowHTTP); err != nil {
		return err
	}
	return checkWebhookChoices(types, description)
}

// checkWebhookChoices checks a webhook's event types and description.
func checkWebhookChoices(types []string, description string) error {
	for i, t := range types {
		if !IsEventType(t) {
			return Errorf(ECodeInvalidArgument, "eventTypes: %q is not an event type (%s)", t, strings.Join(EventTypes(), ", "))
		}
		if containsString(types[:i], t) {
			return Errorf(ECodeInvalidArgument, "eventTypes: %q is given twice", t)
		}
	}
	if len([]rune(description)) > MaxWebhookDescribe {
		return Errorf(ECodeInvalidArgument, "description: must be at most %d characters", MaxWebhookDescribe)
	}
	return nil
}

// webhookInboxes resolves inbox ids to the account's live inboxes: their ids as the API
// shows them (lower case) and their rows.
func webhookInboxes(tx Tx, accountID string, ids []string) ([]string, []int64, error) {
	if len(ids) > MaxWebhookInboxes {
		return nil, nil, Errorf(ECodeInvalidArgument, "inboxIds: at most %d inboxes", MaxWebhookInboxes)
	}
	names, rows := []string{}, []int64{}
	for _, id := range ids {
		id = strings.ToLower(id)
		row, ok, err := tx.LiveInboxOf(accountID, id)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, Errorf(ECodeInvalidArgument, "inboxIds: %s is not an inbox of this account", id)
		}
		if containsRow(rows, row) {
			return nil, nil, Errorf(ECodeInvalidArgument, "inboxIds: %s is given twice", id)
		}
		names, rows = append(names, id), append(rows, row)
	}
	return names, rows, nil
}

// fanOut queues the deliveries of a just appended event: one to each enabled webhook of
// its account that wants it. It runs in the event's unit of work, for every event, so
// the store answers EnabledWebhooks from an index on the account (SQLite: from a cache).
func fanOut(tx Tx, a AppendedEvent, eventType string) error {
	hooks, err := tx.EnabledWebhooks(a.AccountID)
	if err != nil {
		return err
	}
	for i := range hooks {
		if !hooks[i].Wants(eventType, a.InboxRow) {
			continue
		}
		if err := tx.QueueHookDelivery(&hooks[i], a); err != nil {
			return err
		}
	}
	return nil
}

// Webhooks are the account's webhooks and the durable queue of their deliveries
// (CreateWebhook, UpdateWebhook and DeleteWebhook change them; RecordEvent queues).
type Webhooks interface {
	// GetWebhook returns a webhook of an account. Errors: not_found (unknown, or
	// another account's).
	GetWebhook(ctx context.Context, accountID, webhookID string) (*Webhook, error)
	// ListWebhooks returns one page of an account's webhooks, newest first.
	// Errors: invalid_argument (page token).
	ListWebhooks(ctx context.Context, accountID string, limit int, pageToken string) ([]Webhook, string, error)
	// ListHookDeliveries returns one page of a webhook's deliveries, newest first.
	// Errors: not_found (webhook), invalid_argument (page token).
	ListHookDeliveries(ctx context.Context, accountID, webhookID string, limit int, pageToken string) ([]HookDelivery, string, error)
	// ClaimHookDeliveries leases up to c.Limit pending deliveries due at the store's Now
	// to the caller until Now+c.Lease, at most c.PerWebhook-c.Busy[webhook] of each
	// webhook, oldest due first, with their events and webhooks. A delivery of a disabled
	// webhook is not claimed; one whose lease ran out is claimed again.
	ClaimHookDeliveries(ctx context.Context, c HookClaim) ([]HookJob, error)
	// FinishHookDeliveries records the outcomes of attempts, in one write; kept[i] is
	// false when attempt i's lease was lost (the delivery was claimed again, or is gone
	// with its webhook or event).
	FinishHookDeliveries(ctx context.Context, done []HookAttempt) (kept []bool, err error)
	// ReleaseHookDelivery gives back a claimed delivery without recording an attempt (one
	// cut short by a stop), so that it can be claimed again at once.
	ReleaseHookDelivery(ctx context.Context, j HookJob) error
	// OfferHookDeliveries has this store's units of work lease the deliveries they queue
	// to t as they queue them, as far as t has room (HookTaker.Reserve), and hand them to
	// t once they have committed, until stop is called: t then makes them without claiming
	// them. A delivery t had no room for is queued unleased, to be claimed. ok is false
	// when the store offers nothing (every delivery is claimed); stop is then a no-op.
	OfferHookDeliveries(t HookTaker) (stop func(), ok bool)
	// NextHookDue reports when the earliest pending delivery of an enabled webhook comes
	// due (or its lease ends), and false when none is pending.
	NextHookDue(ctx context.Context) (time.Time, bool, error)
	// HookBacklog counts the pending deliveries.
	HookBacklog(ctx context.Context) (int64, error)
}

// HookClaim is what ClaimHookDeliveries takes.
type HookClaim struct {
	Limit      int
	PerWebhook int
	// Busy counts the caller's deliveries in flight, by webhook row.
	Busy  map[int64]int
	Lease time.Duration
}

// Room is how many more due deliveries of a webhook a claim may take, having picked
// picked rows so far: its free slots, within what is left of the limit (<= 0: none).
func (c HookClaim) Room(webhookRow int64, picked int) int {
	return min(c.PerWebhook-c.Busy[webhookRow], c.Limit-picked)
}

// HookJob is a claimed delivery.
type HookJob struct {
	Row       int64
	Claim     string    // the lease's token; FinishHookDeliveries checks it
	LeaseEnds time.Time // the end of the lease as recorded (or a little earlier)
	Webhook   Webhook
	Event     Event
	Attempt   int // attempts made before this one
	CreatedAt time.Time
}

// HookTaker takes deliveries leased to it in the units of work that queue them
// (Webhooks.OfferHookDeliveries), so that it makes them without claiming them. The store
// calls Reserve and Missed inside a unit of work and Take or Cancel once the unit is done:
// none of them may block, nor call the store but for EventsCommitted.
type HookTaker interface {
	// Reserve reports whether the taker has room for one more delivery to webhook row,
	// and keeps the room until Take or Cancel; lease is how long the unit leases it.
	Reserve(webhookRow int64) (lease time.Duration, ok bool)
	// Take hands over reserved deliveries once their unit of work has committed.
	Take(jobs []HookJob)
	// Cancel gives back the room of reserved deliveries (one webhook row each) whose unit
	// of work rolled back or runs again.
	Cancel(webhookRows []int64)
	// Missed tells that a unit of work queued a delivery without offering it (a write of
	// the store's own that hands nothing over: a local delivery's copy, a delivery record's
	// change): the taker claims it once the unit has committed, as one Reserve refused.
	Missed()
}

// HookAttempt is an attempt made, to record: the claimed delivery and what came of it.
type HookAttempt struct {
	Job     HookJob
	Outcome HookOutcome
}

// HookOutcome is the result of one attempt.
type HookOutcome struct {
	At             time.Time
	Status         string // HookDelivered, HookPending (retry at Next) or HookFailed
	ResponseStatus int    // 0: no response
	Error          string
	Next           time.Time
}

// AppendedEvent is what the store tells of an event it appended.
type AppendedEvent struct {
	Seq       int64
	AccountID string
	InboxRow  int64
}

// WebhookTx is what a unit of work reads and writes of webhooks (part of Tx).
type WebhookTx interface {
	// CountWebhooks counts an account's webhooks.
	CountWebhooks(accountID string) (int, error)
	// InsertWebhook stores a new webhook and returns its row.
	InsertWebhook(w *Webhook) (int64, error)
	// WebhookOf returns a webhook of an account. Errors: not_found.
	WebhookOf(accountID, webhookID string) (*Webhook, error)
	// WebhookWithSecret returns the webhook of an account with a secret, nil when none.
	WebhookWithSecret(accountID, secret string) (*Webhook, error)
	// SaveWebhook stores a changed webhook (by Row).
	SaveWebhook(w *Webhook) error
	// DeleteWebhook deletes a webhook and its deliveries.
	DeleteWebhook(row int64) error
	// EnabledWebhooks returns an account's enabled webhooks (Row, EventTypes and
	// InboxRows are what the fan-out reads), as the unit of work sees them: its own
	// changes and those committed before it. The caller must not change them: a store may
	// share them between units.
	EnabledWebhooks(accountID string) ([]Webhook, error)
	// QueueHookDelivery queues the delivery of event a to webhook w (one of
	// EnabledWebhooks), due at the unit's Now.
	QueueHookDelivery(w *Webhook, a AppendedEvent) error
}
