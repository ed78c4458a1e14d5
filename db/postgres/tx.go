package postgres

import (
	"context"
	"crypto/sha256"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The Tx methods of accounts, billing, sends, inboxes and keys: what the rules of package
// db read and write in a unit of work. The ones a check reads through lock the row that
// serializes the checkers first (unit.go).

func (u *unit) AccountPlan(accountID string) (string, error) {
	if plan, ok := u.read.plans[accountID]; ok {
		return plan, nil
	}
	plan, err := accountPlan(u.ctx, u.q(), accountID)
	if err == nil {
		remember(&u.read.plans, accountID, plan)
	}
	return plan, err
}

// accountPlan returns the plan of an account. Errors: not_found.
func accountPlan(ctx context.Context, q querier, accountID string) (string, error) {
	var plan string
	err := q.QueryRow(ctx, "SELECT plan FROM accounts WHERE id = $1", accountID).Scan(&plan)
	if noRows(err) {
		return "", db.Errorf(db.ECodeNotFound, "account %s not found", accountID)
	}
	return plan, err
}

// UsedUnits locks the feature's usage row of the period (made at 0 when there is none)
// and reads it: every charge of the row checks and spends under that lock, held to the
// commit, whether through db.Charge or as a message is written (WriteMessageCharged). The
// row, not the account's, so that the charges of one account queue only on each other.
func (u *unit) UsedUnits(accountID, feature, period string) (int64, error) {
	u.wantLast = true // the charges held back count (deferLast)
	var used int64
	err := u.queryRow(`INSERT INTO usage(account_id, period, feature, used) VALUES ($1, $2, $3, 0)
		ON CONFLICT (account_id, period, feature) DO UPDATE SET used = usage.used RETURNING used`,
		accountID, period, feature).Scan(&used)
	return used, err
}

func (u *unit) SpendUnit(accountID, feature, period string) error {
	u.wantLast = true // after the charges held back (deferLast)
	_, err := u.exec(`INSERT INTO usage(account_id, period, feature, used) VALUES ($1, $2, $3, 1)
		ON CONFLICT (account_id, period, feature) DO UPDATE SET used = usage.used + 1`, accountID, period, feature)
	return err
}

// SendRecord locks the inbox first: a send's idempotency, rate and billing checks begin
// here, so two processes sending with one key run one after the other, and the second
// finds the first's record.
func (u *unit) SendRecord(inboxID int64, key string) (*db.SendRecord, error) {
	if err := u.lockInbox(inboxID); err != nil {
		return nil, err
	}
	r := db.SendRecord{Key: key}
	err := u.queryRow("SELECT fingerprint, message_id, thread_id FROM sends WHERE inbox_id = $1 AND idem_key = $2",
		inboxID, key).Scan(&r.Fingerprint, &r.Result.MessageID, &r.Result.ThreadID)
	if noRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// SendsSince locks the inbox: the rate check that reads it holds until the commit.
func (u *unit) SendsSince(inboxID int64, since time.Time) (int, time.Time, error) {
	if err := u.lockInbox(inboxID); err != nil {
		return 0, time.Time{}, err
	}
	var n int
	var oldest *int64
	err := u.queryRow("SELECT COUNT(*), MIN(created_at) FROM sends WHERE inbox_id = $1 AND created_at > $2",
		inboxID, millis(since)).Scan(&n, &oldest)
	if oldest == nil {
		return n, time.UnixMilli(0), err
	}
	return n, time.UnixMilli(*oldest), err
}

func (u *unit) RecordSend(inboxID int64, r db.SendRecord, at time.Time) error {
	_, err := u.exec("INSERT INTO sends(inbox_id, idem_key, fingerprint, message_id, thread_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
		inboxID, r.Key, r.Fingerprint, r.Result.MessageID, r.Result.ThreadID, millis(at))
	return err
}

func (u *unit) Suppressed(inboxID int64, addrs []string) (map[string]bool, error) {
	suppressed := map[string]bool{}
	if len(addrs) == 0 {
		return suppressed, nil
	}
	rows, err := u.query("SELECT address FROM suppressions WHERE inbox_id = $1 AND address = ANY($2)", inboxID, addrs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanStringSet(rows)
}

func (u *unit) EnqueueOutbound(messageRow int64, recipients []string, at time.Time) error {
	if len(recipients) == 0 {
		return nil
	}
	_, err := u.exec(`INSERT INTO outbound(message_id, recipient, state, next_at, created_at)
		SELECT $1, r, 'ready', $3, $3 FROM unnest($2::text[]) WITH ORDINALITY AS x(r, n) ORDER BY n`,
		messageRow, recipients, millis(at))
	return err
}

func (u *unit) InboxAccount(inboxID int64) (string, error) {
	if account, ok := u.read.inboxAccounts[inboxID]; ok {
		return account, nil
	}
	var account string
	err := u.queryRow("SELECT account_id FROM inboxes WHERE id = $1", inboxID).Scan(&account)
	if err == nil {
		remember(&u.read.inboxAccounts, inboxID, account)
	}
	return account, err
}

func (u *unit) InboxAt(address string) (*db.Inbox, error) {
	in, err := db.ScanInbox(u.queryRow("SELECT "+inboxColumns+" FROM inboxes i WHERE i.address = $1", address))
	if noRows(err) {
		return nil, nil
	}
	return in, err
}

func (u *unit) DomainOwner(domain string) (string, error) {
	var owner string
	err := u.queryRow("SELECT account_id FROM account_domains WHERE domain = $1", domain).Scan(&owner)
	if noRows(err) {
		return "", nil
	}
	return owner, err
}

// InboxAllowance locks the account: the quota check that reads it holds until the commit.
func (u *unit) InboxAllowance(accountID string) (db.InboxAllowance, error) {
	var a db.InboxAllowance
	if err := u.lockAccount(accountID); err != nil {
		return a, err
	}
	err := u.queryRow(`SELECT (SELECT COUNT(*) FROM inboxes WHERE account_id = $1 AND retired_at IS NULL), inbox_quota, plan
		FROM accounts WHERE id = $1`, accountID).Scan(&a.Live, &a.Quota, &a.Plan)
	if noRows(err) {
		return a, db.Errorf(db.ECodeNotFound, "account %s not found", accountID)
	}
	return a, err
}

func (u *unit) InsertInbox(in *db.Inbox) (int64, error) {
	if err := u.authChanged(); err != nil {
		return 0, err
	}
	var id int64
	err := u.queryRow(`INSERT INTO inboxes(uuid, account_id, address, display_name, grp, delivery_status, setup_available, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, true, $7) RETURNING id`, in.UUID, in.AccountID, in.Address, nullString(in.DisplayName), in.Group,
		in.DeliveryStatus, millis(in.CreatedAt.Time)).Scan(&id)
	return id, err
}

func (u *unit) SetDeliveryStatus(inboxID int64, status string) error {
	if err := u.authChanged(); err != nil {
		return err
	}
	_, err := u.exec("UPDATE inboxes SET delivery_status = $1 WHERE id = $2", status, inboxID)
	return err
}

func (u *unit) UpsertAccount(a db.Account) error {
	if err := u.authChanged(); err != nil {
		return err
	}
	delete(u.read.plans, a.ID)
	_, err := u.exec(`INSERT INTO accounts(id, plan, disabled, inbox_quota, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO UPDATE SET plan = excluded.plan`, a.ID, a.Plan, a.Disabled, a.InboxQuota, millis(u.now))
	return err
}

func (u *unit) AccountExists(accountID string) (bool, error) {
	var ok bool
	err := u.queryRow("SELECT EXISTS (SELECT 1 FROM accounts WHERE id = $1)", accountID).Scan(&ok)
	return ok, err
}

func (u *unit) AttachDomain(domain, accountID string) error {
	_, err := u.exec("INSERT INTO account_domains(domain, account_id) VALUES ($1, $2)", domain, accountID)
	return err
}

func (u *unit) KeyOwner(token string) (string, error) { return keyOwner(u.ctx, u.q(), token) }

func (u *unit) LiveInboxOf(accountID, address string) (int64, bool, error) {
	var id int64
	err := u.queryRow("SELECT id FROM inboxes WHERE address = $1 AND account_id = $2 AND retired_at IS NULL", address, accountID).Scan(&id)
	if noRows(err) {
		return 0, false, nil
	}
	return id, err == nil, err
}

func (u *unit) RevokeMailboxKeys(inboxID int64) error {
	if err := u.authChanged(); err != nil {
		return err
	}
	_, err := u.exec("UPDATE keys SET revoked_at = $1 WHERE inbox_id = $2 AND kind = 'mailbox' AND revoked_at IS NULL", millis(u.now), inboxID)
	return err
}

// ActiveAccountKeys locks the account: the key limit check that reads it holds until the
// commit.
func (u *unit) ActiveAccountKeys(accountID string) (int, error) {
	if err := u.lockAccount(accountID); err != nil {
		return 0, err
	}
	var active int
	err := u.queryRow(activeAccountKeysSQL, accountID, millis(u.now)).Scan(&active)
	return active, err
}

// activeAccountKeysSQL counts an account's ($1) account keys neither revoked nor expired
// at $2.
const activeAccountKeysSQL = `SELECT COUNT(*) FROM keys WHERE account_id = $1 AND kind = 'account'
	AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`

func (u *unit) InsertKey(k db.NewKey, inboxID int64) error {
	kind, inbox := "account", (*int64)(nil)
	if inboxID != 0 {
		kind, inbox = "mailbox", &inboxID
	}
	var expires *int64
	if k.ExpiresAt != nil {
		ms := millis(*k.ExpiresAt)
		expires = &ms
	}
	_, err := u.exec(`INSERT INTO keys(account_id, kind, hash, prefix, scopes, inbox_id, expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		k.AccountID, kind, hashToken(k.Token), k.Token[:min(len(k.Token), 12)], strings.Join(k.Scopes, " "), inbox, expires, millis(u.now))
	return err
}

// hashToken is what a key's row keeps of its token.
func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func (u *unit) Audit(e db.AuditEntry) error { return u.audit(e) }

// audit appends an entry to the audit log at w's now.
func (w *wtx) audit(e db.AuditEntry) error {
	_, err := w.exec(`INSERT INTO audit_log(at, actor, action, account_id, inbox, message_id, detail, remote)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, millis(w.now), e.Actor, e.Action, e.AccountID, e.Inbox, e.MessageID, e.Detail, e.Remote)
	return err
}

func (u *unit) AppendEvent(e db.NewEvent) (db.AppendedEvent, error) { return u.appendEvent(e) }

// inboxColumns are the columns db.ScanInbox reads, of inboxes i.
const inboxColumns = "i.id, i.uuid, i.account_id, i.address, i.display_name, i.grp, i.delivery_status, i.setup_available, i.created_at, i.retired_at"
