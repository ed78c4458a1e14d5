package storetest

import (
	"errors"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func unitTests() []test {
	return []test{
		{"a failed unit leaves nothing behind", func(e *env) {
			boom := errors.New("boom")
			err := e.st.Update(e.ctx, func(tx db.Tx) error {
				if err := tx.UpsertAccount(db.Account{ID: "ghost", Plan: "free"}); err != nil {
					return err
				}
				return boom
			})
			e.Assert(errors.Is(err, boom), qt.IsTrue, qt.Commentf("%v", err))
			_, err = e.st.Account(e.ctx, "ghost")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"an isolated failure is undone and the unit goes on", func(e *env) {
			err := e.st.Update(e.ctx, func(tx db.Tx) error {
				if err := tx.UpsertAccount(db.Account{ID: "kept", Plan: "free"}); err != nil {
					return err
				}
				ierr := tx.Isolated(func() error {
					if err := tx.UpsertAccount(db.Account{ID: "undone", Plan: "free"}); err != nil {
						return err
					}
					return db.Errorf(db.ECodeInvalidArgument, "no")
				})
				e.isCode(ierr, db.ECodeInvalidArgument)
				return nil
			})
			e.Assert(err, qt.IsNil)
			_, err = e.st.Account(e.ctx, "kept")
			e.Assert(err, qt.IsNil)
			_, err = e.st.Account(e.ctx, "undone")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"the store's clock is the one it was given", func(e *env) {
			e.Assert(e.st.Now().Equal(start()), qt.IsTrue)
			var in int64
			e.Assert(e.st.Update(e.ctx, func(tx db.Tx) error { in = tx.Now().UnixMilli(); return nil }), qt.IsNil)
			e.Assert(in, qt.Equals, start().UnixMilli())
		}},
	}
}

func accountTests() []test {
	return []test{
		{"an account is made once and follows its plan", func(e *env) {
			e.account("bee", "free", "Bee.Test")
			e.account("bee", "team", "bee.test")
			a, err := e.st.Account(e.ctx, "bee")
			e.Assert(err, qt.IsNil)
			e.Assert(a.Plan, qt.Equals, "team")
			n, err := e.st.CountAccounts(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, 2)
			domains, err := e.st.AccountDomains(e.ctx, "bee")
			e.Assert(err, qt.IsNil)
			e.Assert(domains, qt.DeepEquals, []string{"bee.test"})
			served, err := e.st.DomainServed(e.ctx, "BEE.test")
			e.Assert(err, qt.IsNil)
			e.Assert(served, qt.IsTrue)
			served, err = e.st.DomainServed(e.ctx, "nobody.test")
			e.Assert(err, qt.IsNil)
			e.Assert(served, qt.IsFalse)
		}},
		{"re-ensuring an account keeps the operator's decisions", func(e *env) {
			quota := 1
			e.Assert(db.EnsureAccount(e.ctx, e.st, db.Account{ID: "off", Plan: "free", Disabled: true, InboxQuota: &quota}, nil), qt.IsNil)
			e.account("off", "developer")
			a, err := e.st.Account(e.ctx, "off")
			e.Assert(err, qt.IsNil)
			e.Assert(a.Disabled, qt.IsTrue)
			e.Assert(*a.InboxQuota, qt.Equals, 1)
			e.Assert(a.Plan, qt.Equals, "developer")
		}},
		{"an unknown account is not found", func(e *env) {
			_, err := e.st.Account(e.ctx, "nobody")
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.GetUsage(e.ctx, "nobody")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"an unknown plan or a missing id is refused", func(e *env) {
			e.isCode(db.EnsureAccount(e.ctx, e.st, db.Account{ID: "x", Plan: "gold"}, nil), db.ECodeInvalidArgument)
			e.isCode(db.EnsureAccount(e.ctx, e.st, db.Account{Plan: "free"}, nil), db.ECodeInvalidArgument)
		}},
		{"a domain belongs to one account", func(e *env) {
			e.account("one", "free", "shared.test")
			err := db.EnsureAccount(e.ctx, e.st, db.Account{ID: "two", Plan: "free"}, []string{"Shared.Test"})
			e.isCode(err, "domain_conflict")
			_, err = e.st.Account(e.ctx, "two")
			e.isCode(err, db.ECodeNotFound) // nothing of the refused unit stays
		}},
		{"usage shows the plan and what was spent", func(e *env) {
			e.account("bee", "free")
			e.newInbox("bee", "b@x.test")
			e.Assert(e.st.SetUsage(e.ctx, "bee", db.FeatureSends, 7), qt.IsNil)
			u, err := e.st.GetUsage(e.ctx, "bee")
			e.Assert(err, qt.IsNil)
			e.Assert(u.Plan.PlanID, qt.Equals, "free")
			e.Assert(u.Inboxes.Count, qt.Equals, int64(1))
			used := map[string]int64{}
			for _, f := range u.Features {
				used[f.Feature] = f.Used
			}
			e.Assert(used[db.FeatureSends], qt.Equals, int64(7))
			e.Assert(used[db.FeatureInboxes], qt.Equals, int64(1))
			exempt, err := e.st.GetUsage(e.ctx, "acme")
			e.Assert(err, qt.IsNil)
			e.Assert(exempt.Billing, qt.Equals, db.PlanExempt)
		}},
		{"a spent allowance refuses the unit and a new month restores it", func(e *env) {
			e.account("bee", "free")
			e.Assert(e.st.SetUsage(e.ctx, "bee", db.FeatureTriage, 500), qt.IsNil)
			charge := func() error {
				return e.st.Update(e.ctx, func(tx db.Tx) error { return db.Charge(tx, "bee", db.FeatureTriage, tx.Now()) })
			}
			e.isCode(charge(), db.ECodeBillingLimit)
			e.advance(db.BillingPeriodEnd(start()).Sub(start()) + 1)
			e.Assert(charge(), qt.IsNil)
			u, err := e.st.GetUsage(e.ctx, "bee")
			e.Assert(err, qt.IsNil)
			for _, f := range u.Features {
				if f.Feature == db.FeatureTriage {
					e.Assert(f.Used, qt.Equals, int64(1))
				}
			}
		}},
	}
}
