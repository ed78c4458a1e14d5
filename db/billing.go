package db

import "time"

// Charge spends one unit of a monthly feature (FeatureSends, FeatureTriage) of an account,
// or refuses with billing_limit when its plan's allowance for the period is spent. An
// account on a plan outside the catalog (exempt) is never refused.
//
// Errors: billing_limit, not_found (no such account).
func Charge(tx Tx, accountID, feature string, now time.Time) error {
	plan, err := tx.AccountPlan(accountID)
	if err != nil {
		return err
	}
	period := BillingPeriod(now)
	if p, ok := PlanByID(plan); ok {
		used, err := tx.UsedUnits(accountID, feature, period)
		if err != nil {
			return err
		}
		if used >= IncludedUnits(p, feature) {
			return Errorf(ECodeBillingLimit, "the monthly %s allowance of the %s plan is spent; upgrade, then retry with the same idempotencyKey", feature, p.PlanID)
		}
	}
	return tx.SpendUnit(accountID, feature, period)
}
