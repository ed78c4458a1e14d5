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
	u := &unit{now: s.Now(), events: &s.events, offers: &s.events.offers, inboxes: &s.inboxes}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		u.ctx, u.tx = ctx, tx
		u.cancelHandoff() // a run before this one was rolled back
		return fn(u)
	})
	if err == nil {
		u.handOver()
	} else {
		u.cancelHandoff()
	}
	if u.inboxesChanged {
		s.inboxes.invalidate()
	}
	if u.keysChanged {
		s.auth.invalidate()
	}
	return err
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

	events *eventSignal // fired once the unit's appended events commit
	// offers is where the deliveries the unit queues are offered (offers.go), nil for a
	// write that hands over nothing (it tells the taker it missed them); handoff is what
	// it leased.
	offers  *hookOffers
	handoff handoff
	// appended is the event the unit appended last, which the deliveries queued after it
	// are of (db.RecordEvent); inboxes knows the addresses of the inboxes.
	appended appendedEvent
	inboxes  *inboxCache

	inboxesChanged bool // the store's inbox cache is cleared once the unit is done
	keysChanged    bool // and its auth cache (keys.go)
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

func (u *unit) Isolated(fn func() error) error {
	if _, err := u.tx.ExecContext(u.ctx, "SAVEPOINT isolated"); err != nil {
		return storageError(err)
	}
	ferr := fn()
	if ferr != nil {
		if _, err := u.tx.ExecContext(u.ctx, "ROLLBACK TO isolated"); err != nil {
			return storageError(err)
		}
	}
	if _, err := u.tx.ExecContext(u.ctx, "RELEASE isolated"); err != nil {
		return storageError(err)
	}
	return storageError(ferr)
}

func (u *unit) InboxAccount(inboxID int64) (string, error) {
	var account string
	err := u.tx.QueryRowContext(u.ctx, "SELECT account_id FROM inboxes WHERE id = ?", inboxID).Scan(&account)
	return account, err
}

// InboxRetired needs no lock: the unit runs on the one writer, where no deletion can
// come between it and its commit.
func (u *unit) InboxRetired(inboxID int64) (bool, error) {
	var retired bool
	err := u.tx.QueryRowContext(u.ctx, "SELECT retired_at IS NOT NULL FROM inboxes WHERE id = ?", inboxID).Scan(&retired)
	return retired, err
}

func (u *unit) StoredMessage(inboxID int64, messageID string) (*db.Stored, error) {
	var st db.Stored
	err := u.tx.QueryRowContext(u.ctx, `SELECT m.id, m.message_id, t.uuid FROM messages m JOIN threads t ON t.id = m.thread_id
		WHERE m.inbox_id = +? AND m.message_id = +?`, inboxID, messageID).Scan(&st.RowID, &st.MessageID, &st.ThreadID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (u *unit) ThreadByUUID(inboxID int64, uuid string) (int64, bool, error) {
	var row int64
	err := u.tx.QueryRowContext(u.ctx, "SELECT id FROM threads WHERE uuid = ? AND inbox_id = ?", uuid, inboxID).Scan(&row)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return row, err == nil, err
}

func (u *unit) ThreadsOf(inboxID int64, ids []string) (map[string]db.ThreadRef, error) {
	return threadsOf(u.ctx, u.tx, inboxID, ids)
}

func (u *unit) NewThread(inboxID int64, uuid string) (db.ThreadRef, error) {
	if uuid == "" {
		uuid = newRowUUID()
	}
	row, _, err := newThread(u.ctx, u.tx, inboxID, uuid)
	return db.ThreadRef{Row: row, UUID: uuid}, err
}

func (u *unit) WriteMessage(p db.Prepared, thread db.ThreadRef, withTriage bool) (db.Stored, error) {
	pp := p.(*prepared)
	return writeMessage(u.ctx, u.tx, &pp.m, pp.p, thread, withTriage)
}

func (u *unit) LabelTarget(inboxID int64, thread bool, id string) (db.LabelTarget, bool, error) {
	return labelTarget(u.ctx, u.tx, inboxID, thread, id)
}

func (u *unit) Relabel(t db.LabelTarget, add, remove []string) error {
	return applyLabels(u.ctx, u.tx, add, remove, targetWhere(t), t.Row)
}

func (u *unit) LabelsOf(t db.LabelTarget) (map[int64][]string, error) {
	out := map[int64][]string{}
	err := eachLabel(u.tx.QueryContext(u.ctx, "SELECT m.id, COALESCE(l.label, '') FROM messages m LEFT JOIN message_labels l ON l.message_id = m.id WHERE "+
		targetWhere(t)+" ORDER BY m.id, l.label", t.Row))(func(id int64, l string) {
		if l == "" {
			out[id] = []string{}
			return
		}
		out[id] = append(out[id], l)
	})
	return out, err
}

func (u *unit) ScannedMessage(uuid string) (*db.QuarantineItem, bool, error) {
	return loadForAction(u.ctx, u.tx, uuid)
}

func (u *unit) SetProtection(messageRow int64, p db.Protection, held bool) error {
	_, err := u.tx.ExecContext(u.ctx, "UPDATE messages SET quarantined = ?, protection_z = ? WHERE id = ?", held, packJSON(jsonText(&p)), messageRow)
	return err
}

func (u *unit) DeleteMessage(messageRow int64) error {
	var thread int64
	if err := u.tx.QueryRowContext(u.ctx, "SELECT thread_id FROM messages WHERE id = ?", messageRow).Scan(&thread); err != nil {
		return err
	}
	// Queued before the row goes: the indexer drops what it no longer finds.
	if err := enqueueIndex(u.ctx, u.tx, "m.id = ?", messageRow); err != nil {
		return err
	}
	if _, err := u.tx.ExecContext(u.ctx, "DELETE FROM messages WHERE id = ?", messageRow); err != nil {
		return err
	}
	return refreshThread(u.ctx, u.tx, thread)
}

func (u *unit) AppendEvent(e db.NewEvent) (db.AppendedEvent, error) {
	a, id, err := appendEvent(u.ctx, u.tx, u.events, e)
	u.appended = appendedEvent{AppendedEvent: a, id: id, e: e}
	return a, err
}

func (u *unit) Audit(e db.AuditEntry) error { return audit(u.ctx, u.tx, u.now, e) }

func (u *unit) InboxAt(address string) (*db.Inbox, error) {
	in, err := db.ScanInbox(u.tx.QueryRowContext(u.ctx, "SELECT "+inboxColumns+" FROM inboxes i WHERE i.address = ?", address))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return in, err
}

func (u *unit) DomainOwner(domain string) (string, error) {
	var owner string
	err := u.tx.QueryRowContext(u.ctx, "SELECT account_id FROM account_domains WHERE domain = ?", domain).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

func (u *unit) InboxAllowance(accountID string) (db.InboxAllowance, error) {
	return inboxAllowance(u.ctx, u.tx, accountID)
}

func (u *unit) InsertInbox(in *db.Inbox) (int64, error) {
	u.inboxesChanged = true
	res, err := u.tx.ExecContext(u.ctx, `INSERT INTO inboxes(uuid, account_id, address, display_name, grp, delivery_status, setup_available, created_at)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?)`, in.UUID, in.AccountID, in.Address, nullString(in.DisplayName), in.Group, in.DeliveryStatus, millis(in.CreatedAt.Time))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func (u *unit) SetDeliveryStatus(inboxID int64, status string) error {
	u.inboxesChanged = true
	_, err := u.tx.ExecContext(u.ctx, "UPDATE inboxes SET delivery_status = ? WHERE id = ?", status, inboxID)
	return err
}
