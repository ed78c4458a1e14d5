package sqlite_test

import (
	"context"
	"testing"

	"github.com/inboxd/inboxd/db/sqlite"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// held stores a received message with a quarantine verdict and returns its review id.
func held(t *testing.T, s *sqlite.Store, in *db.Inbox, id string, av db.Antivirus, reasons ...string) string {
	t.Helper()
	n := db.NewMessage{InboxID: in.ID, MessageID: id, Direction: db.Received, From: "x@spam.test", To: []string{in.Address},
		Subject: "s " + id, Text: "t", Timestamp: s.Now(), Labels: db.InitialLabels(db.Received, true, nil),
		Triage: &db.Triage{Status: db.TriagePending}, QueueTriage: true,
		Protection: &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: db.Time{Time: s.Now()}.String(),
			Authentication: db.Authentication{SPF: "none", DKIM: "none", DMARC: "none", SigningDomains: []string{}},
			Spam:           db.Spam{Score: 9, Threshold: 6}, Antivirus: av, Reasons: reasons},
		ProtectionDetail: &db.ProtectionDetail{SpamEngine: "builtin", SpamRules: []db.SpamRule{{Name: "GTUBE", Score: 1000}}},
	}
	_, err := db.Deliver(context.Background(), s, []db.NewMessage{n})
	qt.Assert(t, err, qt.IsNil)
	items, _, err := s.ListQuarantined(context.Background(), db.QuarantineFilter{Inbox: in.Address})
	qt.Assert(t, err, qt.IsNil)
	for _, it := range items {
		if it.MessageID == id {
			return it.UUID
		}
	}
	t.Fatalf("%s is not in the review queue", id)
	return ""
}

var clean = db.Antivirus{Status: "clean", Signatures: []string{}}

func TestReleaseAndDelete(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	spam := held(t, s, in, "<spam@x>", clean, "spam")
	virus := held(t, s, in, "<virus@x>", db.Antivirus{Status: "infected", Signatures: []string{"Eicar-Test-Signature"}}, "malware")
	unscannable := held(t, s, in, "<zip@x>", db.Antivirus{Status: "unscannable", Signatures: []string{}}, "scan_incomplete")

	counts, err := s.QuarantineCounts(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(counts, qt.DeepEquals, []db.QuarantineCount{{AccountID: "a", Inbox: "me@x.test", Count: 3}})

	r, err := s.ReviewMessage(ctx, spam)
	c.Assert(err, qt.IsNil)
	c.Assert(r.Quarantined, qt.IsTrue)
	c.Assert(r.Detail.SpamRules[0].Name, qt.Equals, "GTUBE")

	by := db.Actor{Name: "admin", Remote: "192.0.2.1"}
	ok, err := db.ReleaseMessage(ctx, s, spam, by)
	c.Assert(err, qt.IsNil)
	c.Assert(ok, qt.IsTrue)
	m, err := s.GetMessage(ctx, in.ID, "<spam@x>")
	c.Assert(err, qt.IsNil)
	c.Assert(m.Quarantined, qt.IsFalse)
	c.Assert(m.Labels, qt.DeepEquals, []string{"received", "unread"})
	c.Assert(m.Protection.Status, qt.Equals, db.ProtectionReleased)
	c.Assert(m.Protection.ReleasedBy, qt.Equals, "admin")
	c.Assert(m.Protection.ReleasedAt, qt.Not(qt.Equals), "")
	list, _, err := s.ListMessages(ctx, in.ID, db.MessageFilter{}, 10, "")
	c.Assert(err, qt.IsNil)
	c.Assert(list, qt.HasLen, 1)
	threads, _, err := s.ListThreads(ctx, in.ID, db.MessageFilter{}, 10, "")
	c.Assert(err, qt.IsNil)
	c.Assert(threads, qt.HasLen, 1) // its thread is no longer hidden

	ok, err = db.ReleaseMessage(ctx, s, spam, by)
	c.Assert(err, qt.IsNil)
	c.Assert(ok, qt.IsFalse) // a second release changes nothing

	for _, id := range []string{virus, unscannable} {
		_, err = db.ReleaseMessage(ctx, s, id, by)
		c.Assert(db.IsCode(err, db.ECodeMalwareBlocked), qt.IsTrue, qt.Commentf("%v", err))
	}
	c.Assert(db.DeleteQuarantined(ctx, s, virus, by), qt.IsNil)
	_, err = s.GetMessage(ctx, in.ID, "<virus@x>")
	c.Assert(db.IsCode(err, db.ECodeNotFound), qt.IsTrue)
	c.Assert(db.IsCode(db.DeleteQuarantined(ctx, s, spam, by), db.ECodeNotFound), qt.IsTrue) // released: not in quarantine
	_, err = s.ReviewMessage(ctx, virus)
	c.Assert(db.IsCode(err, db.ECodeNotFound), qt.IsTrue)

	log, err := s.AuditLog(ctx, 10, 0)
	c.Assert(err, qt.IsNil)
	var actions []string
	for _, e := range log {
		actions = append(actions, e.Action+" "+e.MessageID)
		c.Assert(e.Remote, qt.Equals, "192.0.2.1")
	}
	c.Assert(actions, qt.DeepEquals, []string{"delete <virus@x>", "release_refused <zip@x>", "release_refused <virus@x>", "release <spam@x>"})
	older, err := s.AuditLog(ctx, 10, log[1].ID)
	c.Assert(err, qt.IsNil)
	c.Assert(older, qt.HasLen, 2)
}

func TestQuarantinePaging(t *testing.T) {
	c := qt.New(t)
	s := openStore(t)
	in := setup(t, s)
	for _, id := range []string{"<1@x>", "<2@x>", "<3@x>"} {
		held(t, s, in, id, clean, "spam")
	}
	var got []string
	before := ""
	for {
		page, next, err := s.ListQuarantined(context.Background(), db.QuarantineFilter{Limit: 2, Before: before})
		c.Assert(err, qt.IsNil)
		for _, it := range page {
			got = append(got, it.MessageID)
		}
		if next == "" {
			break
		}
		before = next
	}
	c.Assert(got, qt.DeepEquals, []string{"<3@x>", "<2@x>", "<1@x>"})
	page, _, err := s.ListQuarantined(context.Background(), db.QuarantineFilter{AccountID: "nobody"})
	c.Assert(err, qt.IsNil)
	c.Assert(page, qt.HasLen, 0)
}
