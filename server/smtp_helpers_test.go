package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/server"
)

// smtpEnv is an SMTP listener on loopback over its own temp database, with the account
// "acme" owning the inboxes support@ and sales@ on the default domain and team@ on its
// own domain acme.example.
type smtpEnv struct {
	*testServer
	srv  *server.SMTP // the listener
	addr string       // its address
}

func newSMTPEnv(t testing.TB, cfg server.SMTPConfig) *smtpEnv {
	t.Helper()
	c := qt.New(t)
	ctx := context.Background()
	s := newServer(t, serverOptions{noAPI: true, smtp: &cfg})
	c.Assert(db.EnsureAccount(ctx, s.store, db.Account{ID: "acme", Plan: db.PlanExempt}, []string{"acme.example"}), qt.IsNil)
	for _, a := range []string{"support@" + testDomain, "sales@" + testDomain, "team@acme.example"} {
		_, err := db.CreateInbox(ctx, s.store, db.NewInbox{AccountID: "acme", Address: a, DefaultDomain: testDomain})
		c.Assert(err, qt.IsNil)
	}
	return &smtpEnv{testServer: s, srv: s.smtp, addr: s.smtpAddr}
}

func (e *smtpEnv) inbox(addr string) *db.Inbox {
	e.t.Helper()
	in, err := e.store.InboxByAddress(context.Background(), "acme", addr)
	qt.Assert(e.t, err, qt.IsNil)
	return in
}

// messages returns every message of an inbox, newest first.
func (e *smtpEnv) messages(addr string) []db.Message {
	e.t.Helper()
	in := e.inbox(addr)
	var out []db.Message
	token := ""
	for {
		page, next, err := e.store.ListMessages(context.Background(), in.ID, db.MessageFilter{}, 100, token)
		qt.Assert(e.t, err, qt.IsNil)
		out = append(out, page...)
		if next == "" {
			return out
		}
		token = next
	}
}

// testMessage is a small message with a unique Message-ID.
func testMessage(id, to, subject string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: \"Ann Customer\" <ann@customer.example>\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s@customer.example>\r\n", to, subject, id)
	b.WriteString("Date: Mon, 02 Nov 2026 09:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	b.WriteString("Hello,\r\n\r\nthis is the body of " + id + ".\r\n")
	return b.Bytes()
}
