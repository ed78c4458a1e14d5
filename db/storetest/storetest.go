// Package storetest is the contract suite of db.Store: one set of tests of every store
// method and every rule of package db, written against the interfaces only, that every
// store implementation runs (the SQLite store from its own tests; the PostgreSQL store
// later). It knows no SQL and imports no store: an implementation hands Run a function
// that opens a fresh, empty store per test.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// Opener opens a fresh, empty store for one test, reading time from now (the suite moves
// that clock to test periods, windows and retention). The store is closed by the opener's
// own cleanup.
type Opener func(t *testing.T, now func() time.Time) db.Store

// Run runs the whole suite against the stores open makes, one subtest per interface.
func Run(t *testing.T, open Opener) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Units", unitTests()},
		{"Accounts", accountTests()},
		{"Keys", keyTests()},
		{"Inboxes", inboxTests()},
		{"Messages", messageTests()},
		{"Labels", labelTests()},
		{"Sends", sendTests()},
		{"Outbound", outboundTests()},
		{"TriageQueue", triageTests()},
		{"Quarantine", quarantineTests()},
		{"DashboardLogins", dashboardTests()},
		{"ChangeLog", changeLogTests()},
		{"EventLog", eventTests()},
		{"Webhooks", webhookTests()},
		{"TestDouble", testDoubleTests()},
		{"Reset", resetTests()},
		{"Controls", controlTests()},
		{"MessagesSince", sinceTests()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(newEnv(t, open))
				})
			}
		})
	}
}

// test is one behaviour of the contract.
type test struct {
	name string
	run  func(e *env)
}

// start is the suite's first instant: mid-month, so that a month's end is a clock move
// away.
func start() time.Time { return time.Date(2026, 9, 20, 18, 0, 0, 0, time.UTC) }

// env is one test's store and clock, with an exempt account "acme" and its inbox.
type env struct {
	*qt.C
	ctx   context.Context
	st    db.Store
	mu    sync.Mutex
	now   time.Time
	inbox *db.Inbox
}

func newEnv(t *testing.T, open Opener) *env {
	e := &env{C: qt.New(t), ctx: context.Background(), now: start()}
	e.st = open(t, e.clock)
	e.account("acme", db.PlanExempt)
	e.inbox = e.newInbox("acme", "me@x.test")
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

// advance moves the store's clock forward.
func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

func (e *env) account(id, plan string, domains ...string) {
	e.Helper()
	e.Assert(db.EnsureAccount(e.ctx, e.st, db.Account{ID: id, Plan: plan}, domains), qt.IsNil)
}

func (e *env) newInbox(account, address string) *db.Inbox {
	e.Helper()
	in, err := db.CreateInbox(e.ctx, e.st, db.NewInbox{AccountID: account, Address: address, DefaultDomain: "x.test"})
	e.Assert(err, qt.IsNil)
	return in
}

// mail is a received message for in, as the receive pipeline stores it.
func (e *env) mail(in *db.Inbox, messageID string) db.NewMessage {
	return db.NewMessage{InboxID: in.ID, MessageID: messageID, Direction: db.Received, From: "ann@far.test",
		To: []string{in.Address}, Subject: "about " + messageID, Text: "body of " + messageID, Preview: "body of " + messageID,
		Timestamp: e.clock(), Labels: db.InitialLabels(db.Received, false, nil),
		Raw: []byte("From: ann@far.test\r\nMessage-ID: " + messageID + "\r\n\r\nbody of " + messageID + "\r\n")}
}

// receive stores received messages one after the other, a millisecond apart.
func (e *env) receive(msgs ...db.NewMessage) []db.Stored {
	e.Helper()
	var out []db.Stored
	for _, m := range msgs {
		m.Timestamp = e.clock()
		st, err := db.Deliver(e.ctx, e.st, []db.NewMessage{m})
		e.Assert(err, qt.IsNil)
		out = append(out, st...)
		e.advance(time.Millisecond)
	}
	return out
}

// sendRequest is a send from in to rcpts with idempotency key key.
func (e *env) sendRequest(in *db.Inbox, key string, rcpts ...string) db.SendRequest {
	stamp := db.Time{Time: e.clock()}.String()
	d := &db.Delivery{Version: 1, SentAt: stamp, UpdatedAt: stamp}
	for _, r := range rcpts {
		d.Recipients = append(d.Recipients, db.RecipientDelivery{Recipient: r, Status: db.RecipientQueued, UpdatedAt: stamp})
	}
	return db.SendRequest{AccountID: in.AccountID, IdempotencyKey: key, Fingerprint: []byte(key), Recipients: rcpts, RateLimit: 100,
		Message: db.NewMessage{InboxID: in.ID, MessageID: "<" + key + "@x.test>", Direction: db.Sent, From: in.Address, To: rcpts,
			Subject: "sent " + key, Text: "text of " + key, Timestamp: e.clock(), Labels: db.InitialLabels(db.Sent, false, nil), Delivery: d,
			Raw: []byte("From: " + in.Address + "\r\nSubject: sent " + key + "\r\n\r\ntext of " + key + "\r\n")}}
}

func (e *env) send(in *db.Inbox, key string, rcpts ...string) db.SendResult {
	e.Helper()
	res, err := db.CommitSend(e.ctx, e.st, e.sendRequest(in, key, rcpts...))
	e.Assert(err, qt.IsNil)
	return res
}

// isCode checks that err carries a client error code.
func (e *env) isCode(err error, code string) {
	e.Helper()
	e.Assert(db.ErrorCode(err), qt.Equals, code, qt.Commentf("error: %v", err))
}

func (e *env) message(in *db.Inbox, messageID string) *db.Message {
	e.Helper()
	m, err := e.st.GetMessage(e.ctx, in.ID, messageID)
	e.Assert(err, qt.IsNil)
	return m
}
