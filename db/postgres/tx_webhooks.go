package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// Webhooks in a unit of work (db.WebhookTx). The rules are in package db; here are the
// rows. Filters are JSON arrays: they are read whole, never queried into.

// CountWebhooks locks the account: the webhook limit check that reads it holds until the
// commit.
func (u *unit) CountWebhooks(accountID string) (int, error) {
	if err := u.lockAccount(accountID); err != nil {
		return 0, err
	}
	var n int
	err := u.queryRow("SELECT COUNT(*) FROM webhooks WHERE account_id = $1", accountID).Scan(&n)
	return n, err
}

// A change to webhooks takes the log lock (log.go) before it writes, as an append to the
// event log does: it then commits between two appends, never during one, so an event is
// fanned out exactly by the webhooks committed before it, as on SQLite (migration 0015).
// Without it, a change committed while a unit held the lock, after the unit had read the
// webhooks with its event (appendEvent) and before it committed, was missed by the
// unit's events (and by the rest of its group, which reads the webhooks once): events in
// the log after a webhook's creation without a delivery.
func (u *unit) lockLogsForHooks() error {
	u.read.hooks = nil
	b := &pgx.Batch{}
	u.lockLogs(b)
	return u.send(b)
}

func (u *unit) InsertWebhook(w *db.Webhook) (int64, error) {
	if err := u.lockLogsForHooks(); err != nil {
		return 0, err
	}
	var id int64
	err := u.queryRow(`INSERT INTO webhooks(uuid, account_id, url, event_types, inbox_ids, inbox_rows, description,
		enabled, secret, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
		append([]any{w.WebhookID}, db.WebhookValues(w)...)...).Scan(&id)
	return id, err
}

func (u *unit) WebhookOf(accountID, webhookID string) (*db.Webhook, error) {
	w, err := db.ScanWebhook(u.queryRow("SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.uuid = $1 AND w.account_id = $2", webhookID, accountID))
	if noRows(err) {
		return nil, db.WebhookNotFound(webhookID)
	}
	return w, err
}

func (u *unit) WebhookWithSecret(accountID, secret string) (*db.Webhook, error) {
	w, err := db.ScanWebhook(u.queryRow("SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.account_id = $1 AND w.secret = $2", accountID, secret))
	if noRows(err) {
		return nil, nil
	}
	return w, err
}

func (u *unit) SaveWebhook(w *db.Webhook) error {
	if err := u.lockLogsForHooks(); err != nil {
		return err
	}
	_, err := u.exec(`UPDATE webhooks SET account_id = $1, url = $2, event_types = $3, inbox_ids = $4, inbox_rows = $5,
		description = $6, enabled = $7, secret = $8, created_at = $9, updated_at = $10 WHERE id = $11`, append(db.WebhookValues(w), w.Row)...)
	return err
}

// DeleteWebhook deletes the webhook; its deliveries go by the foreign key's cascade.
func (u *unit) DeleteWebhook(row int64) error {
	if err := u.lockLogsForHooks(); err != nil {
		return err
	}
	_, err := u.exec("DELETE FROM webhooks WHERE id = $1", row)
	return err
}

// enabledWebhooksSQL selects the enabled webhooks of the account named by the subquery
// or argument appended to it.
const enabledWebhooksSQL = "SELECT " + db.WebhookColumns + " FROM webhooks w WHERE w.enabled AND w.account_id = "

// EnabledWebhooks is asked for right after an event is appended (db.RecordEvent), which
// read them in its round trip (queueEnabledWebhooks): the log lock is held by then, and
// a round trip fewer under it is a shorter queue on it.
func (u *unit) EnabledWebhooks(accountID string) ([]db.Webhook, error) {
	if p := u.hooks; p != nil && p.accountID == accountID {
		u.hooks = nil
		return p.hooks, nil
	}
	if hooks, ok := u.read.hooks[accountID]; ok {
		return hooks, nil
	}
	rows, err := u.query(enabledWebhooksSQL+"$1", accountID)
	if err != nil {
		return nil, err
	}
	return collectWebhooks(rows)
}

// prefetched is what queueEnabledWebhooks read: the enabled webhooks of an account.
type prefetched struct {
	accountID string
	hooks     []db.Webhook
}

// queueEnabledWebhooks queues in b the reading of the enabled webhooks of the account of
// message row, into what it returns once b has run.
func (w *wtx) queueEnabledWebhooks(b *pgx.Batch, messageRow int64) *[]db.Webhook {
	out := new([]db.Webhook)
	b.Queue(enabledWebhooksSQL+"(SELECT i.account_id FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.id = $1)",
		messageRow).Query(func(rows pgx.Rows) error {
		hooks, err := collectWebhooks(rows)
		*out = hooks
		return err
	})
	return out
}

func collectWebhooks(rows pgx.Rows) ([]db.Webhook, error) {
	defer rows.Close()
	return db.ScanWebhooks(rows)
}

func (u *unit) QueueHookDelivery(w *db.Webhook, a db.AppendedEvent) error {
	_, err := u.exec(`INSERT INTO webhook_deliveries(webhook_id, event_seq, status, created_at, next_attempt_at)
		VALUES ($1, $2, 'pending', $3, $3)`, w.Row, a.Seq, millis(u.now))
	return err
}
