package db

import (
	"encoding/json"
	"time"
)

// The stored webhook row both stores read and write: its filters are JSON arrays, read
// whole and never queried into, and its times are milliseconds.

// WebhookColumns are the columns ScanWebhook reads, in its order, of webhooks w.
const WebhookColumns = "w.id, w.uuid, w.account_id, w.url, w.event_types, w.inbox_ids, w.inbox_rows, w.description, w.enabled, w.secret, w.created_at, w.updated_at"

// WebhookNotFound is the error for a webhook id the account does not have.
func WebhookNotFound(id string) error {
	return Errorf(ECodeNotFound, "webhook %s not found", id)
}

// ScanWebhook decodes a webhook row: id, uuid, account, URL, event types, inbox ids and
// inbox rows (JSON arrays), description, enabled, secret, created and updated.
// A scan error (no row among them) is returned as it is.
func ScanWebhook(r RowScanner) (*Webhook, error) {
	var (
		w                Webhook
		types, ids, rows string
		created, updated int64
	)
	if err := r.Scan(&w.Row, &w.WebhookID, &w.AccountID, &w.URL, &types, &ids, &rows, &w.Description, &w.Enabled, &w.Secret,
		&created, &updated); err != nil {
		return nil, err
	}
	w.CreatedAt, w.UpdatedAt = FromMillis(created), FromMillis(updated)
	for _, f := range []struct {
		raw string
		dst any
	}{{types, &w.EventTypes}, {ids, &w.InboxIDs}, {rows, &w.InboxRows}} {
		if err := json.Unmarshal([]byte(f.raw), f.dst); err != nil {
			return nil, err
		}
	}
	return &w, nil
}

// ScanWebhooks reads webhook rows (ScanWebhook), in order; no rows is the empty list.
func ScanWebhooks(rows Rows) ([]Webhook, error) {
	return ScanList(rows, func(r RowScanner) (Webhook, error) {
		w, err := ScanWebhook(r)
		if err != nil {
			return Webhook{}, err
		}
		return *w, nil
	})
}

// WebhookValues are the stored columns of w after id and uuid, in ScanWebhook's order.
func WebhookValues(w *Webhook) []any {
	rows := w.InboxRows
	if rows == nil {
		rows = []int64{}
	}
	b, _ := json.Marshal(rows)
	return []any{w.AccountID, w.URL, EncodeList(w.EventTypes), EncodeList(w.InboxIDs), string(b), w.Description, w.Enabled, w.Secret,
		w.CreatedAt.UnixMilli(), w.UpdatedAt.UnixMilli()}
}

// ScanHookJob decodes a claimed delivery row: its id, attempt, created time and event
// seq, then its webhook's columns as ScanWebhook reads them; claim and leaseEnds are its
// lease. The event is only its seq until AttachHookEvents.
func ScanHookJob(r RowScanner, claim string, leaseEnds time.Time) (HookJob, error) {
	var j HookJob
	var created int64
	wh, err := ScanWebhook(prefixScanner{r, []any{&j.Row, &j.Attempt, &created, &j.Event.Seq}})
	if err != nil {
		return j, err
	}
	j.Claim, j.LeaseEnds, j.Webhook, j.CreatedAt = claim, leaseEnds, *wh, FromMillis(created).Time
	return j, nil
}

// HookJobSeqs are the event seqs of jobs, for reading their events.
func HookJobSeqs(jobs []HookJob) []int64 {
	seqs := make([]int64, len(jobs))
	for i, j := range jobs {
		seqs[i] = j.Event.Seq
	}
	return seqs
}

// AttachHookEvents gives each job its event, by seq.
func AttachHookEvents(jobs []HookJob, events map[int64]Event) {
	for i := range jobs {
		jobs[i].Event = events[jobs[i].Event.Seq]
	}
}

// prefixScanner scans the columns of prefix before the ones its caller asks for.
type prefixScanner struct {
	row    RowScanner
	prefix []any
}

func (p prefixScanner) Scan(dest ...any) error { return p.row.Scan(append(p.prefix, dest...)...) }
