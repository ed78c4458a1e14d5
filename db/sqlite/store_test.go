package sqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/inboxd/inboxd/db/sqlite"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"), sqlite.Options{})
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { s.Close() })
	return s
}

func setup(t *testing.T, s *sqlite.Store) *db.Inbox {
	t.Helper()
	ctx := context.Background()
	qt.Assert(t, db.EnsureAccount(ctx, s, db.Account{ID: "a", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, s, db.NewInbox{AccountID: "a", Address: "me@x.test", DefaultDomain: "x.test"})
	qt.Assert(t, err, qt.IsNil)
	return in
}

func send(t *testing.T, s *sqlite.Store, in *db.Inbox, key string, rcpts ...string) db.SendResult {
	t.Helper()
	stamp := db.Time{Time: s.Now()}.String()
	d := &db.Delivery{Version: 1, SentAt: stamp, UpdatedAt: stamp}
	for _, r := range rcpts {
		d.Recipients = append(d.Recipients, db.RecipientDelivery{Recipient: r, Status: db.RecipientQueued, UpdatedAt: stamp})
	}
	res, err := db.CommitSend(context.Background(), s, db.SendRequest{
		AccountID: "a", IdempotencyKey: key, Fingerprint: []byte(key), Recipients: rcpts, RateLimit: 100,
		Message: db.NewMessage{InboxID: in.ID, MessageID: "<" + key + "@x.test>", Direction: db.Sent, From: in.Address, To: rcpts,
			Subject: "s", Text: "t", Timestamp: s.Now(), Labels: db.InitialLabels(db.Sent, false, nil), Delivery: d},
	})
	qt.Assert(t, err, qt.IsNil)
	return res
}

func TestDeliveryRecordNeverLeavesATerminalState(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	res := send(t, s, in, "k1", "far@away.test")

	jobs, err := s.ClaimOutbound(ctx, 10)
	c.Assert(err, qt.IsNil)
	c.Assert(jobs, qt.HasLen, 1)
	retry := s.Now().Add(time.Hour)
	c.Assert(s.FinishOutbound(ctx, jobs[0], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDeferred}, RetryAt: &retry}), qt.IsNil)
	jobs2, err := s.ClaimOutbound(ctx, 10)
	c.Assert(err, qt.IsNil)
	c.Assert(jobs2, qt.HasLen, 0) // not due for an hour

	c.Assert(s.FinishOutbound(ctx, jobs[0], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientBounced, SMTPStatusCode: "550"}}), qt.IsNil)
	m, err := s.GetMessage(ctx, in.ID, res.MessageID)
	c.Assert(err, qt.IsNil)
	c.Assert(m.Delivery.Version, qt.Equals, 3)
	c.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientBounced)
	c.Assert(m.Delivery.Recipients[0].Delivered, qt.IsFalse)

	// The queue row is gone: a late, duplicate outcome changes nothing.
	c.Assert(s.FinishOutbound(ctx, jobs[0], db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientDelivered}}), qt.IsNil)
	m, _ = s.GetMessage(ctx, in.ID, res.MessageID)
	c.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientBounced)
	c.Assert(m.Delivery.Version, qt.Equals, 3)
}

func TestParkedJobsKeepTheirRecord(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	res := send(t, s, in, "k1", "far@away.test")
	jobs, _ := s.ClaimOutbound(ctx, 10)
	c.Assert(s.FinishOutbound(ctx, jobs[0], db.OutboundOutcome{Park: true}), qt.IsNil)
	n, err := s.ParkedCount(ctx)
	c.Assert(err, qt.IsNil)
	c.Assert(n, qt.Equals, int64(1))
	m, _ := s.GetMessage(ctx, in.ID, res.MessageID)
	c.Assert(m.Delivery.Version, qt.Equals, 1)
	c.Assert(m.Delivery.Recipients[0].Status, qt.Equals, db.RecipientQueued)
}

func TestDeleteInboxPurgesAndRetires(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	send(t, s, in, "k1", "far@away.test")
	c.Assert(s.DeleteInbox(ctx, in), qt.IsNil)
	jobs, err := s.ClaimOutbound(ctx, 10)
	c.Assert(err, qt.IsNil)
	c.Assert(jobs, qt.HasLen, 0)
	_, err = s.InboxByAddress(ctx, "a", "me@x.test")
	c.Assert(db.ErrorCode(err), qt.Equals, db.ECodeInboxRetired)
	_, err = db.CreateInbox(ctx, s, db.NewInbox{AccountID: "a", Address: "ME@x.test", DefaultDomain: "x.test"})
	c.Assert(db.ErrorCode(err), qt.Equals, db.ECodeInboxConflict)
}

func TestThreadingFollowsReferencesNotSubjects(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := openStore(t)
	in := setup(t, s)
	msg := func(id string, cands []string, quarantined bool) db.Stored {
		n := db.NewMessage{InboxID: in.ID, MessageID: id, Direction: db.Received, From: "a@b.test", Subject: "same subject",
			Timestamp: s.Now(), ThreadCandidates: cands, Labels: db.InitialLabels(db.Received, quarantined, nil)}
		if quarantined {
			n.Protection = &db.Protection{Status: db.ProtectionQuarantined, Reasons: []string{"spam"}}
		}
		st, err := db.Deliver(ctx, s, []db.NewMessage{n})
		c.Assert(err, qt.IsNil)
		return st[0]
	}
	root := msg("<root@b>", nil, false)
	other := msg("<other@b>", nil, false)
	c.Assert(other.ThreadID, qt.Not(qt.Equals), root.ThreadID) // same subject, no headers: new thread
	reply := msg("<r1@b>", []string{"<other@b>", "<root@b>"}, false)
	c.Assert(reply.ThreadID, qt.Equals, root.ThreadID) // the latest candidate in the list wins
	q := msg("<q@b>", []string{"<root@b>"}, true)
	c.Assert(q.ThreadID, qt.Not(qt.Equals), root.ThreadID) // quarantined mail never joins
	onQ := msg("<onq@b>", []string{"<q@b>"}, false)
	c.Assert(onQ.ThreadID, qt.Not(qt.Equals), q.ThreadID) // nor anchors
	dup := msg("<root@b>", nil, false)
	c.Assert(dup.Existed, qt.IsTrue)
	c.Assert(dup.ThreadID, qt.Equals, root.ThreadID)
}

// A session of an operator removed by hand (the sqlite3 shell, whose foreign keys are off
// unless asked for) logs no one in.
func TestSessionOfARemovedOperatorEnds(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	c.Assert(err, qt.IsNil)
	defer s.Close()
	c.Assert(s.SetOperatorPasswordHash(ctx, "admin", []byte("hash"), "password_set"), qt.IsNil)
	hash := sha256.Sum256([]byte("token"))
	c.Assert(s.CreateDashboardSession(ctx, hash, "admin", s.Now().Add(time.Hour), 10), qt.IsNil)
	shell, err := sql.Open("sqlite3", path)
	c.Assert(err, qt.IsNil)
	defer shell.Close()
	_, err = shell.Exec("DELETE FROM operators WHERE name = 'admin'")
	c.Assert(err, qt.IsNil)
	sess, err := s.DashboardSession(ctx, hash)
	c.Assert(err, qt.IsNil)
	c.Assert(sess, qt.IsNil)
}
