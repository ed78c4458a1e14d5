package storetest

import (
	"fmt"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func (e *env) accountKey(account string, scopes ...string) string {
	e.Helper()
	tok := db.GenerateAccountToken()
	e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: account, Token: tok, Scopes: scopes}), qt.IsNil)
	return tok
}

func (e *env) works(token string) bool {
	_, err := e.st.Authenticate(e.ctx, token)
	return err == nil
}

func keyTests() []test {
	return []test{
		{"an account key resolves to its account and scopes", func(e *env) {
			tok := e.accountKey("acme", db.ScopeInboxesRead, db.ScopeMessagesSend)
			p, err := e.st.Authenticate(e.ctx, tok)
			e.Assert(err, qt.IsNil)
			e.Assert(p, qt.DeepEquals, &db.Principal{AccountID: "acme", Scopes: []string{db.ScopeInboxesRead, db.ScopeMessagesSend}})
			owner, err := e.st.KeyOwner(e.ctx, tok)
			e.Assert(err, qt.IsNil)
			e.Assert(owner, qt.Equals, "acme")
			owner, err = e.st.KeyOwner(e.ctx, db.GenerateAccountToken())
			e.Assert(err, qt.IsNil)
			e.Assert(owner, qt.Equals, "")
		}},
		{"storing a key twice changes nothing", func(e *env) {
			tok := e.accountKey("acme", db.ScopeInboxesRead)
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: tok, Scopes: []string{db.ScopeInboxesRead}}), qt.IsNil)
			n, err := e.st.ActiveAccountKeys(e.ctx, "acme")
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, 1)
		}},
		{"a key of another account is refused", func(e *env) {
			e.account("bee", "free")
			tok := e.accountKey("acme", db.ScopeInboxesRead)
			err := db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "bee", Token: tok, Scopes: []string{db.ScopeInboxesRead}})
			e.isCode(err, db.ECodeInvalidArgument)
		}},
		{"a key of the wrong shape is refused", func(e *env) {
			for _, k := range []db.NewKey{
				{AccountID: "acme", Token: "xyz_0123456789abcdef", Scopes: db.AllScopes()},
				{AccountID: "acme", Token: "bze_short", Scopes: db.AllScopes()},
				{AccountID: "acme", Token: db.GenerateAccountToken()},
				{AccountID: "acme", Token: db.GenerateAccountToken(), Scopes: []string{"inboxes:everything"}},
				{AccountID: "acme", Token: db.GenerateAccountToken(), Scopes: []string{db.ScopeInboxesRead, db.ScopeInboxesRead}},
				{AccountID: "acme", Token: db.GenerateMailboxToken(e.inbox.UUID)},
			} {
				e.isCode(db.CreateKey(e.ctx, e.st, k), db.ECodeInvalidArgument)
			}
		}},
		{"a key of an unknown account or inbox is not found", func(e *env) {
			e.isCode(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "nobody", Token: db.GenerateAccountToken(), Scopes: db.AllScopes()}), db.ECodeNotFound)
			e.isCode(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: db.GenerateMailboxToken("u"), InboxAddress: "nobody@x.test"}), db.ECodeNotFound)
		}},
		{"the account key limit counts active keys only", func(e *env) {
			past := start().Add(-time.Hour)
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: db.GenerateAccountToken(), Scopes: db.AllScopes(), ExpiresAt: &past}), qt.IsNil)
			for range db.MaxActiveKeys {
				e.accountKey("acme", db.ScopeInboxesRead)
			}
			n, err := e.st.ActiveAccountKeys(e.ctx, "acme")
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, db.MaxActiveKeys)
			err = db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: db.GenerateAccountToken(), Scopes: db.AllScopes()})
			e.isCode(err, db.ECodeKeyLimit)
			// Mailbox keys do not count.
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: db.GenerateMailboxToken(e.inbox.UUID), InboxAddress: e.inbox.Address}), qt.IsNil)
		}},
		{"a mailbox key resolves to its inbox, and a replacing one revokes the others", func(e *env) {
			key := func(replace bool) string {
				tok := db.GenerateMailboxToken(e.inbox.UUID)
				e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: tok, InboxAddress: "ME@x.test", Replace: replace}), qt.IsNil)
				return tok
			}
			first, second := key(false), key(false)
			p, err := e.st.Authenticate(e.ctx, first)
			e.Assert(err, qt.IsNil)
			e.Assert(p, qt.DeepEquals, &db.Principal{AccountID: "acme", Mailbox: true, InboxID: e.inbox.ID})
			e.Assert(e.works(second), qt.IsTrue)
			third := key(true)
			e.Assert(e.works(third), qt.IsTrue)
			e.Assert(e.works(first), qt.IsFalse)
			e.Assert(e.works(second), qt.IsFalse)
		}},
		{"a missing, unknown, malformed or expired key is unauthorized", func(e *env) {
			soon := start().Add(time.Hour)
			tok := db.GenerateAccountToken()
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: tok, Scopes: db.AllScopes(), ExpiresAt: &soon}), qt.IsNil)
			e.Assert(e.works(tok), qt.IsTrue)
			e.advance(time.Hour)
			for _, bad := range []string{"", "Bearer x", db.GenerateAccountToken(), tok} {
				_, err := e.st.Authenticate(e.ctx, bad)
				e.isCode(err, db.ECodeUnauthorized)
			}
		}},
		{"a key of a disabled account is denied", func(e *env) {
			e.Assert(db.EnsureAccount(e.ctx, e.st, db.Account{ID: "off", Plan: "free", Disabled: true}, nil), qt.IsNil)
			tok := e.accountKey("off", db.ScopeInboxesRead)
			_, err := e.st.Authenticate(e.ctx, tok)
			e.isCode(err, db.ECodeAccessDenied)
		}},
		{"keys are listed without their secrets and revoked by id", func(e *env) {
			e.account("bee", db.PlanExempt)
			soon := start().Add(time.Hour)
			acc := db.GenerateAccountToken()
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: acc, Scopes: []string{db.ScopeInboxesRead}, ExpiresAt: &soon}), qt.IsNil)
			box := db.GenerateMailboxToken(e.inbox.UUID)
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: box, InboxAddress: e.inbox.Address}), qt.IsNil)
			e.accountKey("bee", db.ScopeInboxesRead)

			keys, err := e.st.ListKeys(e.ctx, "acme")
			e.Assert(err, qt.IsNil)
			e.Assert(keys, qt.HasLen, 2)
			e.Assert(keys[0].KeyID, qt.Equals, db.KeyIDOfToken(acc))
			e.Assert(keys[0].Scopes, qt.DeepEquals, []string{db.ScopeInboxesRead})
			e.Assert(keys[0].ExpiresAt.Equal(soon), qt.IsTrue)
			e.Assert(acc[:len(keys[0].Prefix)], qt.Equals, keys[0].Prefix)
			e.Assert(len(keys[0].Prefix) < 20, qt.IsTrue)
			e.Assert(keys[1].Mailbox, qt.IsTrue)
			e.Assert(keys[1].Inbox, qt.Equals, e.inbox.Address)
			e.Assert(keys[1].Status(e.clock()), qt.Equals, "active")
			all, err := e.st.ListKeys(e.ctx, "")
			e.Assert(err, qt.IsNil)
			e.Assert(all, qt.HasLen, 3)

			k, err := e.st.RevokeKey(e.ctx, db.KeyIDOfToken(box))
			e.Assert(err, qt.IsNil)
			e.Assert(k.Status(e.clock()), qt.Equals, "revoked")
			e.Assert(e.works(box), qt.IsFalse)
			e.Assert(e.works(acc), qt.IsTrue)
			e.advance(time.Minute)
			again, err := e.st.RevokeKey(e.ctx, db.KeyIDOfToken(box))
			e.Assert(err, qt.IsNil)
			e.Assert(again.RevokedAt.Equal(*k.RevokedAt), qt.IsTrue)

			_, err = e.st.RevokeKey(e.ctx, db.KeyIDOfToken(db.GenerateAccountToken()))
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.RevokeKey(e.ctx, acc)
			e.isCode(err, db.ECodeInvalidArgument)
		}},
		{"a disabled account's keys are denied until it is enabled", func(e *env) {
			tok := e.accountKey("acme", db.ScopeInboxesRead)
			e.Assert(e.works(tok), qt.IsTrue) // and cached
			e.Assert(e.st.SetAccountDisabled(e.ctx, "acme", true), qt.IsNil)
			_, err := e.st.Authenticate(e.ctx, tok)
			e.isCode(err, db.ECodeAccessDenied)
			e.Assert(e.st.SetAccountDisabled(e.ctx, "acme", false), qt.IsNil)
			e.Assert(e.works(tok), qt.IsTrue)
			e.isCode(e.st.SetAccountDisabled(e.ctx, "nobody", true), db.ECodeNotFound)
		}},
		{"a deleted inbox's mailbox keys stop working", func(e *env) {
			in := e.newInbox("acme", "gone@x.test")
			tok := db.GenerateMailboxToken(in.UUID)
			e.Assert(db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: tok, InboxAddress: in.Address}), qt.IsNil)
			e.Assert(e.works(tok), qt.IsTrue)
			e.Assert(e.st.DeleteInbox(e.ctx, in), qt.IsNil)
			e.Assert(e.works(tok), qt.IsFalse)
			err := db.CreateKey(e.ctx, e.st, db.NewKey{AccountID: "acme", Token: db.GenerateMailboxToken(in.UUID), InboxAddress: in.Address})
			e.isCode(err, db.ECodeNotFound)
		}},
	}
}

func inboxTests() []test {
	return []test{
		{"an inbox is found by address in any case, by row and for delivery", func(e *env) {
			got, err := e.st.InboxByAddress(e.ctx, "acme", "ME@X.test")
			e.Assert(err, qt.IsNil)
			e.Assert(got.ID, qt.Equals, e.inbox.ID)
			e.Assert(got.DeliveryStatus, qt.Equals, db.DeliveryReady)
			got, err = e.st.InboxByRowID(e.ctx, e.inbox.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(got.Address, qt.Equals, "me@x.test")
			got, err = e.st.LocalInbox(e.ctx, "me@x.test")
			e.Assert(err, qt.IsNil)
			e.Assert(got.UUID, qt.Equals, e.inbox.UUID)
		}},
		{"an unknown inbox, or another account's, is not found", func(e *env) {
			e.account("bee", "free")
			_, err := e.st.InboxByAddress(e.ctx, "bee", e.inbox.Address)
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.InboxByAddress(e.ctx, "acme", "nobody@x.test")
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.InboxByRowID(e.ctx, e.inbox.ID+1000)
			e.isCode(err, db.ECodeNotFound)
			_, err = e.st.LocalInbox(e.ctx, "nobody@x.test")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"creating an address again answers the same inbox", func(e *env) {
			again, err := db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "acme", Address: "Me@x.test", DefaultDomain: "x.test"})
			e.Assert(err, qt.IsNil)
			e.Assert(again.ID, qt.Equals, e.inbox.ID)
		}},
		{"another account's address is a conflict", func(e *env) {
			e.account("bee", "free")
			_, err := db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "bee", Address: e.inbox.Address, DefaultDomain: "x.test"})
			e.isCode(err, db.ECodeInboxConflict)
		}},
		{"a retired address is never reused", func(e *env) {
			in := e.newInbox("acme", "old@x.test")
			e.Assert(e.st.DeleteInbox(e.ctx, in), qt.IsNil)
			_, err := e.st.InboxByAddress(e.ctx, "acme", in.Address)
			e.isCode(err, db.ECodeInboxRetired)
			got, err := e.st.InboxByRowID(e.ctx, in.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(got.Retired, qt.IsTrue)
			_, err = db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "acme", Address: in.Address, DefaultDomain: "x.test"})
			e.isCode(err, db.ECodeInboxConflict)
		}},
		{"mail for an inbox deleted after its address was resolved is refused, all of it", func(e *env) {
			in := e.newInbox("acme", "gone@x.test")
			resolved, err := e.st.LocalInbox(e.ctx, in.Address)
			e.Assert(err, qt.IsNil)
			e.Assert(resolved.Retired, qt.IsFalse)
			e.Assert(e.st.DeleteInbox(e.ctx, in), qt.IsNil)
			_, err = db.Deliver(e.ctx, e.st, []db.NewMessage{e.mail(resolved, "<late@far.test>")})
			e.isCode(err, db.ECodeInboxRetired)
			_, err = db.Deliver(e.ctx, e.st, []db.NewMessage{e.mail(e.inbox, "<both@far.test>"), e.mail(resolved, "<both@far.test>")})
			e.isCode(err, db.ECodeInboxRetired)
			for _, inbox := range []*db.Inbox{resolved, e.inbox} {
				msgs, _, err := e.st.ListMessages(e.ctx, inbox.ID, db.MessageFilter{}, 10, "")
				e.Assert(err, qt.IsNil)
				e.Assert(msgs, qt.HasLen, 0, qt.Commentf("inbox %s", inbox.Address))
			}
			_, err = db.CommitSend(e.ctx, e.st, e.sendRequest(resolved, "k1", "a@far.test"))
			e.isCode(err, db.ECodeInboxRetired)
		}},
		{"a local delivery into an inbox deleted after it was routed records what LocalGone says", func(e *env) {
			in := e.newInbox("acme", "gone@x.test")
			res := e.send(e.inbox, "k1", in.Address)
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(jobs, qt.HasLen, 1)
			e.Assert(e.st.DeleteInbox(e.ctx, in), qt.IsNil)
			copy := e.mail(in, "<k1@x.test>")
			bounce := db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientBounced, Reason: "recipient mailbox was deleted",
				SMTPStatusCode: "550", SMTPEnhancedStatusCode: "5.1.1"}, Suppress: true}
			e.Assert(e.st.FinishOutboundBatch(e.ctx, jobs, []db.OutboundOutcome{{Update: db.RecipientDelivery{Status: db.RecipientDelivered},
				Local: &copy, LocalGone: &bounce}}), qt.IsNil)
			m := e.message(e.inbox, res.MessageID)
			e.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientBounced)
			e.Assert(m.Labels, qt.Contains, db.LabelBounced)
			msgs, _, err := e.st.ListMessages(e.ctx, in.ID, db.MessageFilter{}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(msgs, qt.HasLen, 0)
			left, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(left, qt.HasLen, 0)
		}},
		{"an address off the default domain needs a domain of the account", func(e *env) {
			_, err := db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "acme", Address: "a@elsewhere.test", DefaultDomain: "x.test"})
			e.isCode(err, db.ECodeDomainNotReady)
			e.account("acme", db.PlanExempt, "elsewhere.test")
			_, err = db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "acme", Address: "a@elsewhere.test", DefaultDomain: "x.test"})
			e.Assert(err, qt.IsNil)
		}},
		{"the plan and the quota bound the live inboxes", func(e *env) {
			e.account("bee", "free")
			for i := range 5 {
				e.newInbox("bee", fmt.Sprintf("b%d@x.test", i))
			}
			_, err := db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "bee", Address: "b5@x.test", DefaultDomain: "x.test"})
			e.isCode(err, db.ECodeBillingLimit)
			// A fixture describes a state: it is not refused.
			_, err = db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "bee", Address: "b6@x.test", DefaultDomain: "x.test", Seeding: true})
			e.Assert(err, qt.IsNil)
			quota := 1
			e.Assert(db.EnsureAccount(e.ctx, e.st, db.Account{ID: "q", Plan: "team", InboxQuota: &quota}, nil), qt.IsNil)
			e.newInbox("q", "q1@x.test")
			_, err = db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "q", Address: "q2@x.test", DefaultDomain: "x.test"})
			e.isCode(err, db.ECodeInboxLimit)
			_, err = db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: "nobody", Address: "n@x.test", DefaultDomain: "x.test"})
			e.isCode(err, db.ECodeNotFound)
		}},
		{"a pending inbox gets ready by finishing its setup or creating it again", func(e *env) {
			n := db.NewInbox{AccountID: "acme", Address: "p@x.test", DefaultDomain: "x.test", DeliveryStatus: db.DeliveryPending, Seeding: true}
			in, err := db.CreateInbox(e.ctx, e.st, n)
			e.Assert(err, qt.IsNil)
			e.Assert(in.DeliveryStatus, qt.Equals, db.DeliveryPending)
			ready, err := e.st.FinishSetup(e.ctx, in)
			e.Assert(err, qt.IsNil)
			e.Assert(ready.DeliveryStatus, qt.Equals, db.DeliveryReady)
			got, err := e.st.InboxByRowID(e.ctx, in.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(got.DeliveryStatus, qt.Equals, db.DeliveryReady)

			n.Address = "p2@x.test"
			in, err = db.CreateInbox(e.ctx, e.st, n)
			e.Assert(err, qt.IsNil)
			n.Seeding = false
			in, err = db.CreateInbox(e.ctx, e.st, n)
			e.Assert(err, qt.IsNil)
			e.Assert(in.DeliveryStatus, qt.Equals, db.DeliveryReady)
		}},
		{"inboxes list oldest first, by page and by group", func(e *env) {
			sales := "sales"
			for i := range 3 {
				in := e.newInbox("acme", fmt.Sprintf("s%d@x.test", i))
				_, err := e.st.UpdateInboxGroup(e.ctx, in, &sales)
				e.Assert(err, qt.IsNil)
			}
			page, next, err := e.st.ListInboxes(e.ctx, "acme", nil, 2, "")
			e.Assert(err, qt.IsNil)
			e.Assert(addresses(page), qt.DeepEquals, []string{"me@x.test", "s0@x.test"})
			page, next, err = e.st.ListInboxes(e.ctx, "acme", nil, 2, next)
			e.Assert(err, qt.IsNil)
			e.Assert(addresses(page), qt.DeepEquals, []string{"s1@x.test", "s2@x.test"})
			e.Assert(next, qt.Equals, "")
			page, _, err = e.st.ListInboxes(e.ctx, "acme", &sales, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 3)
			e.Assert(*page[0].Group, qt.Equals, "sales")
			moved, err := e.st.UpdateInboxGroup(e.ctx, &page[0], nil)
			e.Assert(err, qt.IsNil)
			e.Assert(moved.Group, qt.IsNil)
			page, _, err = e.st.ListInboxes(e.ctx, "acme", &sales, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 2)
		}},
		{"a tampered page token is refused", func(e *env) {
			e.newInbox("acme", "two@x.test")
			_, next, err := e.st.ListInboxes(e.ctx, "acme", nil, 1, "")
			e.Assert(err, qt.IsNil)
			_, _, err = e.st.ListInboxes(e.ctx, "acme", nil, 1, next+"x")
			e.isCode(err, db.ECodeInvalidArgument)
			e.account("bee", "free")
			_, _, err = e.st.ListInboxes(e.ctx, "bee", nil, 1, next)
			e.isCode(err, db.ECodeInvalidArgument)
		}},
	}
}

func addresses(ins []db.Inbox) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Address
	}
	return out
}
