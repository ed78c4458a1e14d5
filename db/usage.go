package db

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// PlanExempt is an operator account: nothing is metered. It is not in the public catalog.
const PlanExempt = "exempt"

// Metered features.
const (
	FeatureInboxes = "inboxes"
	FeatureSends   = "sends"
	FeatureTriage  = "triage"
)

// Plan is one entry of the plan catalog (API-NOTES section 12).
type Plan struct {
	PlanID      string       `json:"planId"`
	Name        string       `json:"name"`
	Description string       `json:"description"`
	Price       float64      `json:"price"`
	Included    PlanIncluded `json:"included"`
	TopUps      bool         `json:"topUps"`
}

type PlanIncluded struct {
	Inboxes       int64 `json:"inboxes"`
	Sends         int64 `json:"sends"`
	Triage        int64 `json:"triage"`
	CustomDomains int64 `json:"customDomains"`
	StorageMb     int64 `json:"storageMb"`
	Seats         int64 `json:"seats"`
}

// Plans returns the plan catalog.
func Plans() []Plan {
	return []Plan{
		{"free", "Free", "Try agents with real inboxes. No card required.", 0,
			PlanIncluded{Inboxes: 5, Sends: 1000, Triage: 500, CustomDomains: 0, StorageMb: 1024, Seats: 1}, false},
		{"developer", "Developer", "For one person's agents in production.", 20,
			PlanIncluded{Inboxes: 10, Sends: 10000, Triage: 10000, CustomDomains: 5, StorageMb: 10240, Seats: 2}, true},
		{"team", "Team", "For a team running a fleet of agents.", 99,
			PlanIncluded{Inboxes: 100, Sends: 100000, Triage: 100000, CustomDomains: 50, StorageMb: 102400, Seats: 10}, true},
	}
}

// PlanByID finds a catalog plan.
func PlanByID(id string) (Plan, bool) {
	for _, p := range Plans() {
		if p.PlanID == id {
			return p, true
		}
	}
	return Plan{}, false
}

// Usage is the getUsage response (API-NOTES section 12).
type Usage struct {
	Billing  string       `json:"billing"` // metered | exempt
	Plan     *UsagePlan   `json:"plan"`
	Inboxes  UsageInboxes `json:"inboxes"`
	Features []Feature    `json:"features"`
	Plans    []Plan       `json:"plans"`
}

type UsagePlan struct {
	PlanID           string  `json:"planId"`
	Status           string  `json:"status"`
	CurrentPeriodEnd *string `json:"currentPeriodEnd"`
	CanceledAt       *string `json:"canceledAt"`
}

type UsageInboxes struct {
	Count int64  `json:"count"`
	Limit *int64 `json:"limit"`
}

type Feature struct {
	Feature   string  `json:"feature"`
	Granted   *int64  `json:"granted"`
	Used      int64   `json:"used"`
	Remaining *int64  `json:"remaining"`
	Unlimited bool    `json:"unlimited"`
	ResetsAt  *string `json:"resetsAt"`
}

// Billing periods are calendar months in UTC: sends and triage reset on the first.
func period(t time.Time) string { return t.UTC().Format("2006-01") }

func periodEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// SetUsage sets the units an account has spent on a feature in the current period.
func (s *Store) SetUsage(ctx context.Context, accountID, feature string, used int64) error {
	ctx = noCancel(ctx)
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO usage(account_id, period, feature, used) VALUES (?, ?, ?, ?)
			ON CONFLICT(account_id, period, feature) DO UPDATE SET used = excluded.used`,
			accountID, period(s.Now()), feature, used)
		return err
	})
}

func usedUnits(ctx context.Context, tx *sql.Tx, accountID, feature string, now time.Time) (int64, error) {
	var used int64
	err := tx.QueryRowContext(ctx, "SELECT used FROM usage WHERE account_id = ? AND period = ? AND feature = ?",
		accountID, period(now), feature).Scan(&used)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return used, err
}

// chargeUnit spends one unit of a monthly feature, or fails with billing_limit.
func chargeUnit(ctx context.Context, tx *sql.Tx, accountID, feature string, now time.Time) error {
	plan, err := accountPlan(ctx, tx, accountID)
	if err != nil {
		return err
	}
	if p, ok := PlanByID(plan); ok {
		used, err := usedUnits(ctx, tx, accountID, feature, now)
		if err != nil {
			return err
		}
		if used >= includedUnits(p, feature) {
			return Errorf(ECodeBillingLimit, "the monthly %s allowance of the %s plan is spent; upgrade, then retry with the same idempotencyKey", feature, p.PlanID)
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO usage(account_id, period, feature, used) VALUES (?, ?, ?, 1)
		ON CONFLICT(account_id, period, feature) DO UPDATE SET used = used + 1`, accountID, period(now), feature)
	return err
}

// chargeInboxUnit is chargeUnit for the account that owns the inbox with row id inboxID.
func chargeInboxUnit(ctx context.Context, tx *sql.Tx, inboxID int64, feature string, now time.Time) error {
	var accountID string
	if err := tx.QueryRowContext(ctx, "SELECT account_id FROM inboxes WHERE id = ?", inboxID).Scan(&accountID); err != nil {
		return err
	}
	return chargeUnit(ctx, tx, accountID, feature, now)
}

func includedUnits(p Plan, feature string) int64 {
	switch feature {
	case FeatureSends:
		return p.Included.Sends
	case FeatureTriage:
		return p.Included.Triage
	case FeatureInboxes:
		return p.Included.Inboxes
	}
	return 0
}

func accountPlan(ctx context.Context, tx *sql.Tx, accountID string) (string, error) {
	var plan string
	err := tx.QueryRowContext(ctx, "SELECT plan FROM accounts WHERE id = ?", accountID).Scan(&plan)
	if errors.Is(err, sql.ErrNoRows) {
		return "", Errorf(ECodeNotFound, "account %s not found", accountID)
	}
	return plan, err
}

// GetUsage reports an account's plan, inbox count and remaining balances.
func (s *Store) GetUsage(ctx context.Context, accountID string) (*Usage, error) {
	ctx = noCancel(ctx)
	now := s.Now()
	var u *Usage
	err := s.read(ctx, func(tx *sql.Tx) error {
		plan, err := accountPlan(ctx, tx, accountID)
		if err != nil {
			return err
		}
		var count int64
		var quota sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM inboxes WHERE account_id = ?1 AND retired_at IS NULL),
			inbox_quota FROM accounts WHERE id = ?1`, accountID).Scan(&count, &quota); err != nil {
			return err
		}
		u = &Usage{Billing: "metered", Inboxes: UsageInboxes{Count: count}, Features: []Feature{}, Plans: Plans()}
		if quota.Valid {
			u.Inboxes.Limit = &quota.Int64
		}
		p, ok := PlanByID(plan)
		if !ok {
			u.Billing = PlanExempt
			return nil
		}
		end := Time{periodEnd(now)}.String()
		u.Plan = &UsagePlan{PlanID: p.PlanID, Status: "active", CurrentPeriodEnd: &end}
		domains, err := countRows(ctx, tx, "SELECT COUNT(*) FROM account_domains WHERE account_id = ?", accountID)
		if err != nil {
			return err
		}
		sends, err := usedUnits(ctx, tx, accountID, FeatureSends, now)
		if err != nil {
			return err
		}
		triage, err := usedUnits(ctx, tx, accountID, FeatureTriage, now)
		if err != nil {
			return err
		}
		feature := func(name string, granted, used int64, resets *string) Feature {
			rem := max(granted-used, 0)
			return Feature{Feature: name, Granted: &granted, Used: used, Remaining: &rem, ResetsAt: resets}
		}
		// storage_mb and seats are declared by the catalog but not metered (as on the hosted service).
		u.Features = []Feature{
			feature(FeatureInboxes, p.Included.Inboxes, count, nil),
			feature(FeatureSends, p.Included.Sends, sends, &end),
			feature(FeatureTriage, p.Included.Triage, triage, &end),
			feature("custom_domains", p.Included.CustomDomains, domains, nil),
			feature("storage_mb", p.Included.StorageMb, 0, nil),
			feature("seats", p.Included.Seats, 1, nil),
		}
		return nil
	})
	return u, err
}

func countRows(ctx context.Context, tx *sql.Tx, query string, args ...any) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}
