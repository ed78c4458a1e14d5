package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Update runs a unit of work (db.Units) as one write: it shares the group commit with the
// other writes (write.go), so fn may run twice, as db.Units says.
func (s *Store) Update(ctx context.Context, fn func(tx db.Tx) error) error {
	ctx = noCancel(ctx)
	now := s.Now()
	return s.write(ctx, func(tx *sql.Tx) error { return fn(&unit{ctx: ctx, tx: tx, now: now}) })
}

// prepared is a message packed for storing (messages.go).
type prepared struct {
	m db.NewMessage
	p *packedMessage
}

func (p *prepared) Message() *db.NewMessage { return &p.m }

// Prepare packs m (its bodies and verdicts, compressed) outside the writer.
func (s *Store) Prepare(m *db.NewMessage) db.Prepared {
	p := &prepared{m: *m}
	p.p = pack(&p.m)
	return p
}

// unit is db.Tx over one write transaction.
type unit struct {
	ctx context.Context
	tx  *sql.Tx
	now time.Time
}

func (u *unit) Now() time.Time { return u.now }

func (u *unit) AccountPlan(accountID string) (string, error) {
	return accountPlan(u.ctx, u.tx, accountID)
}

func (u *unit) UsedUnits(accountID, feature, period string) (int64, error) {
	return usedUnits(u.ctx, u.tx, accountID, feature, period)
}

func (u *unit) SpendUnit(accountID, feature, period string) error {
	_, err := u.tx.ExecContext(u.ctx, `INSERT INTO usage(account_id, period, feature, used) VALUES (?, ?, ?, 1)
		ON CONFLICT(account_id, period, feature) DO UPDATE SET used = used + 1`, accountID, period, feature)
	return err
}

func (u *unit) SendRecord(inboxID int64, key string) (*db.SendRecord, error) {
	r := db.SendRecord{Key: key}
	err := u.tx.QueryRowContext(u.ctx, "SELECT fingerprint, message_id, thread_id FROM sends WHERE inbox_id = ? AND idem_key = ?",
		inboxID, key).Scan(&r.Fingerprint, &r.Result.MessageID, &r.Result.ThreadID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (u *unit) SendsSince(inboxID int64, since time.Time) (int, time.Time, error) {
	var n int
	var oldest sql.NullInt64
	err := u.tx.QueryRowContext(u.ctx, "SELECT COUNT(*), MIN(created_at) FROM sends WHERE inbox_id = ? AND created_at > ?",
		inboxID, millis(since)).Scan(&n, &oldest)
	return n, time.UnixMilli(oldest.Int64), err
}

func (u *unit) RecordSend(inboxID int64, r db.SendRecord, at time.Time) error {
	_, err := u.tx.ExecContext(u.ctx, "INSERT INTO sends(inbox_id, idem_key, fingerprint, message_id, thread_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
		inboxID, r.Key, r.Fingerprint, r.Result.MessageID, r.Result.ThreadID, millis(at))
	return err
}

func (u *unit) Suppressed(inboxID int64, addrs []string) (map[string]bool, error) {
	return suppressedAmong(u.ctx, u.tx, inboxID, addrs)
}

func (u *unit) EnqueueOutbound(messageRow int64, recipients []string, at time.Time) error {
	for _, rcpt := range recipients {
		if _, err := u.tx.ExecContext(u.ctx, "INSERT INTO outbound(message_id, recipient, state, next_at, created_at) VALUES (?, ?, 'ready', ?, ?)",
			messageRow, rcpt, millis(at), millis(at)); err != nil {
			return err
		}
	}
	return nil
}

func (u *unit) InsertMessage(p db.Prepared) (db.Stored, error) {
	pp := p.(*prepared)
	return insertMessage(u.ctx, u.tx, &pp.m, pp.p)
}
