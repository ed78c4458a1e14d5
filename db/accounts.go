package db

import (
	"context"
	"strings"
)

// EnsureAccount creates the account if it does not exist, else updates its plan, and
// attaches the given domains to it. Running it twice with the same input changes nothing.
// Only the plan follows the input on an existing account: the disabled flag and the quota
// are operator decisions that re-loading a fixture must not undo.
//
// Errors: invalid_argument (unknown plan, no id), domain_conflict (a domain belongs to
// another account).
func EnsureAccount(ctx context.Context, st Units, a Account, domains []string) error {
	if _, ok := PlanByID(a.Plan); !ok && a.Plan != PlanExempt {
		return Errorf(ECodeInvalidArgument, "plan: unknown plan %q", a.Plan)
	}
	if a.ID == "" {
		return Errorf(ECodeInvalidArgument, "id: account id is required")
	}
	return st.Update(ctx, func(tx Tx) error {
		if err := tx.UpsertAccount(a); err != nil {
			return err
		}
		for _, d := range domains {
			if err := attachDomain(tx, a.ID, strings.ToLower(d)); err != nil {
				return err
			}
		}
		return nil
	})
}

// attachDomain gives a domain to an account, unless another account has it.
func attachDomain(tx Tx, accountID, domain string) error {
	owner, err := tx.DomainOwner(domain)
	switch {
	case err != nil:
		return err
	case owner == "":
		return tx.AttachDomain(domain, accountID)
	case owner != accountID:
		return Errorf("domain_conflict", "domain %s belongs to another account", domain)
	}
	return nil
}
