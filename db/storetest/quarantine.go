package storetest

import (
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// Antivirus verdicts of held mail: one a person may release, one never released.
func cleanScan() db.Antivirus { return db.Antivirus{Status: "clean", Signatures: []string{}} }
func infected() db.Antivirus {
	return db.Antivirus{Status: "infected()", Signatures: []string{"Eicar-Test-Signature"}}
}

// held is received mail the protection scan quarantined.
func (e *env) held(in *db.Inbox, messageID string, av db.Antivirus) db.NewMessage {
	m := e.queued(in, messageID)
	m.Labels = db.InitialLabels(db.Received, true, nil)
	m.Protection = &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: db.Time{Time: e.clock()}.String(),
		Authentication: db.Authentication{SPF: "none", DKIM: "none", DMARC: "none", SigningDomains: []string{}},
		Spam:           db.Spam{Score: 9, Threshold: 6}, Antivirus: av, Reasons: []string{"spam"}}
	m.ProtectionDetail = &db.ProtectionDetail{SpamEngine: "builtin", SpamRules: []db.SpamRule{{Name: "GTUBE", Score: 1000}}}
	return m
}

// reviewID is the review dashboard's id of a held message of the suite's inbox.
func (e *env) reviewID(messageID string) string {
	e.Helper()
	items, _, err := e.st.ListQuarantined(e.ctx, db.QuarantineFilter{Inbox: e.inbox.Address})
	e.Assert(err, qt.IsNil)
	for _, it := range items {
		if it.MessageID == messageID {
			return it.UUID
		}
	}
	e.Fatalf("%s is not in the review queue", messageID)
	return ""
}

// operator is who acts in the review dashboard.
func operator() db.Actor { return db.Actor{Name: "admin", Remote: "192.0.2.1"} }

func quarantineTests() []test {
	return []test{
		{"held mail waits for review, newest first, by page", func(e *env) {
			e.receive(e.held(e.inbox, "<h1@far.test>", cleanScan()), e.held(e.inbox, "<h2@far.test>", cleanScan()), e.mail(e.inbox, "<ok@far.test>"))
			items, next, err := e.st.ListQuarantined(e.ctx, db.QuarantineFilter{Limit: 1})
			e.Assert(err, qt.IsNil)
			e.Assert(items, qt.HasLen, 1)
			e.Assert(items[0].MessageID, qt.Equals, "<h2@far.test>")
			items, _, err = e.st.ListQuarantined(e.ctx, db.QuarantineFilter{Limit: 1, Before: next})
			e.Assert(err, qt.IsNil)
			e.Assert(items[0].MessageID, qt.Equals, "<h1@far.test>")
			_, _, err = e.st.ListQuarantined(e.ctx, db.QuarantineFilter{Limit: 1, Before: "not a cursor"})
			e.isCode(err, db.ECodeInvalidArgument)
			counts, err := e.st.QuarantineCounts(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(counts, qt.DeepEquals, []db.QuarantineCount{{AccountID: "acme", Inbox: "me@x.test", Count: 2}})
			r, err := e.st.ReviewMessage(e.ctx, items[0].UUID)
			e.Assert(err, qt.IsNil)
			e.Assert(r.Quarantined, qt.IsTrue)
			e.Assert(r.Detail.SpamRules[0].Name, qt.Equals, "GTUBE")
			e.Assert(r.Text, qt.Equals, "body of <h1@far.test>")
			_, err = e.st.ReviewMessage(e.ctx, "no-such-message")
			e.isCode(err, db.ECodeNotFound)
		}},
		{"a release lets the message through once", func(e *env) {
			e.receive(e.held(e.inbox, "<h@far.test>", cleanScan()))
			id := e.reviewID("<h@far.test>")
			ok, err := db.ReleaseMessage(e.ctx, e.st, id, operator())
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsTrue)
			m := e.message(e.inbox, "<h@far.test>")
			e.Assert(m.Labels, qt.DeepEquals, []string{db.LabelReceived, db.LabelUnread})
			e.Assert(m.Protection.Status, qt.Equals, db.ProtectionReleased)
			e.Assert(m.Protection.ReleasedBy, qt.Equals, "admin")
			ok, err = db.ReleaseMessage(e.ctx, e.st, id, operator())
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsFalse)
			log, err := e.st.AuditLog(e.ctx, 10, 0)
			e.Assert(err, qt.IsNil)
			e.Assert(log, qt.HasLen, 1)
			e.Assert(log[0].Action, qt.Equals, "release")
			_, err = db.ReleaseMessage(e.ctx, e.st, "no-such-message", operator())
			e.isCode(err, db.ECodeNotFound)
		}},
		{"malware is never released, and the refusal is audited", func(e *env) {
			e.receive(e.held(e.inbox, "<v@far.test>", infected()))
			_, err := db.ReleaseMessage(e.ctx, e.st, e.reviewID("<v@far.test>"), operator())
			e.isCode(err, db.ECodeMalwareBlocked)
			e.Assert(e.message(e.inbox, "<v@far.test>").Labels, qt.DeepEquals, []string{db.LabelQuarantined})
			log, err := e.st.AuditLog(e.ctx, 10, 0)
			e.Assert(err, qt.IsNil)
			e.Assert(log[0].Action, qt.Equals, "release_refused")
		}},
		{"held mail is deleted for good, other mail is not", func(e *env) {
			e.receive(e.held(e.inbox, "<h@far.test>", infected()))
			id := e.reviewID("<h@far.test>")
			e.Assert(db.DeleteQuarantined(e.ctx, e.st, id, operator()), qt.IsNil)
			_, err := e.st.GetMessage(e.ctx, e.inbox.ID, "<h@far.test>")
			e.isCode(err, db.ECodeNotFound)
			e.isCode(db.DeleteQuarantined(e.ctx, e.st, id, operator()), db.ECodeNotFound)
			e.Assert(e.queueLen(), qt.Equals, int64(0))
		}},
		{"the audit log pages newest first", func(e *env) {
			for _, a := range []string{"login", "logout", "login"} {
				e.Assert(e.st.Audit(e.ctx, db.AuditEntry{Actor: "admin", Action: a}), qt.IsNil)
			}
			log, err := e.st.AuditLog(e.ctx, 2, 0)
			e.Assert(err, qt.IsNil)
			e.Assert(log, qt.HasLen, 2)
			e.Assert(log[1].Action, qt.Equals, "logout")
			e.Assert(log[0].At.Equal(start()), qt.IsTrue)
			older, err := e.st.AuditLog(e.ctx, 2, log[1].ID)
			e.Assert(err, qt.IsNil)
			e.Assert(older, qt.HasLen, 1)
			e.Assert(older[0].Action, qt.Equals, "login")
		}},
		{"an operator's password hash is kept, and its change audited", func(e *env) {
			h, err := e.st.OperatorPasswordHash(e.ctx, "admin")
			e.Assert(err, qt.IsNil)
			e.Assert(h, qt.IsNil)
			e.Assert(e.st.SetOperatorPasswordHash(e.ctx, "admin", []byte("hash"), "set by test"), qt.IsNil)
			h, err = e.st.OperatorPasswordHash(e.ctx, "admin")
			e.Assert(err, qt.IsNil)
			e.Assert(string(h), qt.Equals, "hash")
			log, err := e.st.AuditLog(e.ctx, 10, 0)
			e.Assert(err, qt.IsNil)
			e.Assert(log, qt.HasLen, 1)
		}},
	}
}
