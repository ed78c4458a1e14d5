package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Webhooks (migration 0015, db.Webhooks and db.WebhookTx). The rules are in package db;
// here are the rows. Filters are JSON arrays: they are read whole, never queried into.

func (u *unit) CountWebhooks(accountID string) (int, error) {
	var n int
	err := u.tx.QueryRowContext(u.ctx, "SELECT COUNT(*) FROM webhooks WHERE account_id = ?", accountID).Scan(&n)
	return n, err
}

func (u *unit) InsertWebhook(w *db.Webhook) (int64, error) {
	u.events.hooks.change()
	var id int64
	err := u.tx.QueryRowContext(u.ctx, `INSERT INTO webhooks(uuid, account_id, url, event_types, inbox_ids, inbox_rows, description,
		enabled, secret, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		append([]any{w.WebhookID}, db.WebhookValues(w)...)...).Scan(&id)
	return id, err
}

func (u *unit) WebhookOf(accountID, webhookID string) (*db.Webhook, error) {
	return webhookOf(u.ctx, u.tx, accountID, webhookID)
}

func webhookOf(ctx context.Context, q rowQuerier, accountID, webhookID string) (*db.Webhook, error) {
	w, err := db.ScanWebhook(q.QueryRowContext(ctx, "SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.uuid = ? AND w.account_id = ?",
		webhookID, accountID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.WebhookNotFound(webhookID)
	}
	return w, err
}

func (u *unit) WebhookWithSecret(accountID, secret string) (*db.Webhook, error) {
	w, err := db.ScanWebhook(u.tx.QueryRowContext(u.ctx, "SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.account_id = ? AND w.secret = ?",
		accountID, secret))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return w, err
}

func (u *unit) SaveWebhook(w *db.Webhook) error {
	u.events.hooks.change()
	_, err := u.tx.ExecContext(u.ctx, `UPDATE webhooks SET account_id = ?, url = ?, event_types = ?, inbox_ids = ?, inbox_rows = ?,
		description = ?, enabled = ?, secret = ?, created_at = ?, updated_at = ? WHERE id = ?`, append(db.WebhookValues(w), w.Row)...)
	return err
}

// DeleteWebhook deletes the webhook; its deliveries go by the foreign key's cascade.
func (u *unit) DeleteWebhook(row int64) error {
	u.events.hooks.change()
	_, err := u.tx.ExecContext(u.ctx, "DELETE FROM webhooks WHERE id = ?", row)
	return err
}

// EnabledWebhooks answers from the store's cache (webhook_cache.go) when it can.
func (u *unit) EnabledWebhooks(accountID string) ([]db.Webhook, error) {
	if hooks, ok := u.events.hooks.get(accountID); ok {
		return hooks, nil
	}
	rows, err := u.tx.QueryContext(u.ctx, "SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.account_id = ? AND w.enabled = 1", accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	hooks, err := db.ScanWebhooks(rows)
	if err == nil {
		u.events.hooks.put(accountID, hooks)
	}
	return hooks, err
}

func (u *unit) QueueHookDelivery(w *db.Webhook, a db.AppendedEvent) error {
	until, token, ev, leased := u.reserveHandoff(w, a.Seq)
	res, err := u.tx.ExecContext(u.ctx, `INSERT INTO webhook_deliveries(webhook_id, event_seq, status, created_at, next_attempt_at, claimed_until, claim)
		VALUES (?, ?, 'pending', ?, ?, ?, ?)`, w.Row, a.Seq, millis(u.now), millis(u.now), until, token)
	if leased {
		u.queuedHandoff(res, w, ev, until, err)
	}
	return err
}

// GetWebhook returns a webhook of an account.
func (s *Store) GetWebhook(ctx context.Context, accountID, webhookID string) (*db.Webhook, error) {
	w, err := webhookOf(noCancel(ctx), s.r.DB, accountID, webhookID)
	if err != nil && !db.IsCode(err, db.ECodeNotFound) {
		return nil, storageError(err)
	}
	return w, err
}

// ListWebhooks returns one page of an account's webhooks, newest first.
func (s *Store) ListWebhooks(ctx context.Context, accountID string, limit int, pageToken string) ([]db.Webhook, string, error) {
	scope := db.ListScope("webhooks", accountID)
	c, err := s.decodeToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	page, pageArgs := keyset("w.created_at", "w.id", true, c, limit)
	rows, err := s.r.QueryContext(ctx, "SELECT "+db.WebhookColumns+" FROM webhooks w WHERE w.account_id = ?"+page,
		append([]any{accountID}, pageArgs...)...)
	if err != nil {
		return nil, "", storageError(err)
	}
	defer rows.Close()
	out, err := db.ScanWebhooks(rows)
	if err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(w db.Webhook) (int64, int64) { return millis(w.CreatedAt.Time), w.Row })
	return out, next, nil
}

// ListHookDeliveries returns one page of a webhook's deliveries, newest first.
func (s *Store) ListHookDeliveries(ctx context.Context, accountID, webhookID string, limit int, pageToken string) ([]db.HookDelivery, string, error) {
	w, err := s.GetWebhook(ctx, accountID, webhookID)
	if err != nil {
		return nil, "", err
	}
	scope := db.ListScope("webhook-deliveries", accountID, webhookID)
	c, err := s.decodeToken(pageToken, scope)
	if err != nil {
		return nil, "", err
	}
	page, pageArgs := keyset("d.created_at", "d.id", true, c, limit)
	rows, err := s.r.QueryContext(ctx, `SELECT d.id, e.event_id, e.type, d.attempt, d.status, d.response_status, d.error, d.created_at,
		d.last_attempt_at, d.next_attempt_at, d.delivered_at FROM webhook_deliveries d JOIN events e ON e.seq = d.event_seq
		WHERE d.webhook_id = ?`+page, append([]any{w.Row}, pageArgs...)...)
	if err != nil {
		return nil, "", storageError(err)
	}
	defer rows.Close()
	out := []db.HookDelivery{}
	for rows.Next() {
		d, err := scanHookDelivery(rows)
		if err != nil {
			return nil, "", storageError(err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", storageError(err)
	}
	out, next := db.CutPage(s.tokens, scope, out, limit, func(d db.HookDelivery) (int64, int64) { return millis(d.CreatedAt.Time), d.Row })
	return out, next, nil
}

func scanHookDelivery(rows *sql.Rows) (db.HookDelivery, error) {
	var (
		d                       db.HookDelivery
		status                  sql.NullInt64
		errText                 sql.NullString
		created                 int64
		last, next, deliveredAt sql.NullInt64
	)
	if err := rows.Scan(&d.Row, &d.EventID, &d.Type, &d.Attempt, &d.Status, &status, &errText, &created, &last, &next, &deliveredAt); err != nil {
		return d, err
	}
	d.CreatedAt = db.Time{Time: time.UnixMilli(created).UTC()}
	if status.Valid {
		v := int(status.Int64)
		d.ResponseStatus = &v
	}
	d.Error = errText.String
	d.LastAttemptAt, d.DeliveredAt = optTime(last), optTime(deliveredAt)
	if d.Status == db.HookPending {
		d.NextAttemptAt = optTime(next)
	}
	return d, nil
}

func optTime(v sql.NullInt64) *db.Time {
	if !v.Valid {
		return nil
	}
	return &db.Time{Time: time.UnixMilli(v.Int64).UTC()}
}
