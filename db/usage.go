package db

import (
	"time"
)

// PlanExempt is an operator account: nothing is metered. It is not in the public catalog.
const PlanExempt = "exempt"

// PlanFree is the catalog plan an account is on unless it chose another.
const PlanFree = "free"

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
		{PlanFree, "Free", "Try agents with real inboxes. No card required.", 0,
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

// AccountPlans returns the id of every plan an account may be on: the catalog's and
// PlanExempt.
func AccountPlans() []string {
	ids := []string{}
	for _, p := range Plans() {
		ids = append(ids, p.PlanID)
	}
	return append(ids, PlanExempt)
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

// BillingPeriod names the period t falls in. Billing periods are calendar months in UTC:
// sends and triage reset on the first.
func BillingPeriod(t time.Time) string { return t.UTC().Format("2006-01") }

// BillingPeriodEnd is when the period of t ends.
func BillingPeriodEnd(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// IncludedUnits is what plan p includes of feature in a period.
func IncludedUnits(p Plan, feature string) int64 {
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

// UsageCounts are what a store counts for an account's usage report.
type UsageCounts struct {
	Inboxes, Domains, Sends, Triage int64 // live inboxes, custom domains, units spent this period
	InboxQuota                      *int64
}

// UsageOf is the usage report of an account on plan with counts c, at now.
func UsageOf(plan string, c UsageCounts, now time.Time) *Usage {
	u := &Usage{Billing: "metered", Inboxes: UsageInboxes{Count: c.Inboxes, Limit: c.InboxQuota}, Features: []Feature{}, Plans: Plans()}
	p, ok := PlanByID(plan)
	if !ok {
		u.Billing = PlanExempt
		return u
	}
	end := Time{Time: BillingPeriodEnd(now)}.String()
	u.Plan = &UsagePlan{PlanID: p.PlanID, Status: "active", CurrentPeriodEnd: &end}
	feature := func(name string, granted, used int64, resets *string) Feature {
		rem := max(granted-used, 0)
		return Feature{Feature: name, Granted: &granted, Used: used, Remaining: &rem, ResetsAt: resets}
	}
	// storage_mb and seats are declared by the catalog but not metered (as on the hosted service).
	u.Features = []Feature{
		feature(FeatureInboxes, p.Included.Inboxes, c.Inboxes, nil),
		feature(FeatureSends, p.Included.Sends, c.Sends, &end),
		feature(FeatureTriage, p.Included.Triage, c.Triage, &end),
		feature("custom_domains", p.Included.CustomDomains, c.Domains, nil),
		feature("storage_mb", p.Included.StorageMb, 0, nil),
		feature("seats", p.Included.Seats, 1, nil),
	}
	return u
}
