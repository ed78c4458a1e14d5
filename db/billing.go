package db

import "time"

// Allowance is what an account may spend of a monthly feature (FeatureSends,
// FeatureTriage) in the billing period of a moment: Limit units, or any number when
// Unmetered (an account on a plan outside the catalog, exempt, is never refused).
type Allowance struct {
	AccountID, Feature, Period string
	Limit                      int64
	Unmetered                  bool
	plan                       string
}

// AllowanceOf reads the allowance of feature an account has at now.
//
// Errors: not_found (no such account).
func AllowanceOf(tx Tx, accountID, feature string, now time.Time) (Allowance, error) {
	plan, err := tx.AccountPlan(accountID)
	if err != nil {
		return Allowance{}, err
	}
	a := Allowance{AccountID: accountID, Feature: feature, Period: BillingPeriod(now), plan: plan}
	if p, ok := PlanByID(plan); ok {
		a.Limit = IncludedUnits(p, feature)
	} else {
		a.Unmetered = true
	}
	return a, nil
}

// Spent is the billing_limit error of a charge the allowance refuses.
func (a Allowance) Spent() error {
	return Errorf(ECodeBillingLimit, "the monthly %s allowance of the %s plan is spent; upgrade, then retry with the same idempotencyKey", a.Feature, a.plan)
}

// Charge spends one unit of a monthly feature (FeatureSends, FeatureTriage) of an account,
// or refuses with billing_limit when its plan's allowance for the period is spent. An
// account on a plan outside the catalog (exempt) is never refused.
//
// Errors: billing_limit, not_found (no such account).
func Charge(tx Tx, accountID, feature string, now time.Time) error {
	a, err := AllowanceOf(tx, accountID, feature, now)
	if err != nil {
		return err
	}
	return a.spend(tx)
}

// spend spends one unit of a, or refuses with billing_limit when its limit is reached.
func (a Allowance) spend(tx Tx) error {
	if !a.Unmetered {
		used, err := tx.UsedUnits(a.AccountID, a.Feature, a.Period)
		if err != nil {
			return err
		}
		if used >= a.Limit {
			return a.Spent()
		}
	}
	return tx.SpendUnit(a.AccountID, a.Feature, a.Period)
}
