package server_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/mail/protect"
	"github.com/inboxd/inboxd/server"
)

// newScanningSMTP is an SMTP listener on loopback whose mail service scans with cfg, over
// its own temp database with the inbox support@ of account acme.
func newScanningSMTP(t *testing.T, cfg protect.Config) (addr string, store db.Store) {
	return newSMTPWith(t, cfg, db.PlanExempt, nil)
}

// newSMTPWith is newScanningSMTP with the account on plan, and configure (when not nil)
// given the mail service's configuration before it is built.
func newSMTPWith(t *testing.T, cfg protect.Config, plan string, configure func(*mail.Config)) (addr string, store db.Store) {
	c := qt.New(t)
	ctx := context.Background()
	s := newServer(t, serverOptions{noAPI: true, protect: &cfg, mail: configure, smtp: &server.SMTPConfig{}})
	c.Assert(db.EnsureAccount(ctx, s.store, db.Account{ID: "acme", Plan: plan}, nil), qt.IsNil)
	_, err := db.CreateInbox(ctx, s.store, db.NewInbox{AccountID: "acme", Address: "support@" + testDomain, DefaultDomain: testDomain})
	c.Assert(err, qt.IsNil)
	return s.smtpAddr, s.store
}

func sendSMTP(t *testing.T, addr, from, raw string) error {
	cl, err := smtp.Dial(addr)
	qt.Assert(t, err, qt.IsNil)
	defer cl.Close()
	qt.Assert(t, cl.Hello("mx.sender.example"), qt.IsNil)
	qt.Assert(t, cl.Mail(from, nil), qt.IsNil)
	qt.Assert(t, cl.Rcpt("support@inboxd.test", nil), qt.IsNil)
	w, err := cl.Data()
	qt.Assert(t, err, qt.IsNil)
	_, err = io.WriteString(w, raw)
	qt.Assert(t, err, qt.IsNil)
	return w.Close()
}

func heldMessages(t *testing.T, store db.Store) []db.Message {
	in, err := store.InboxByAddress(context.Background(), "acme", "support@"+testDomain)
	qt.Assert(t, err, qt.IsNil)
	msgs, _, err := store.ListMessages(context.Background(), in.ID, db.MessageFilter{Labels: []string{db.LabelQuarantined}}, 100, "")
	qt.Assert(t, err, qt.IsNil)
	return msgs
}

// Mail over SMTP is scanned before it is acknowledged: spam and EICAR are stored held.
func TestSMTPMailIsScanned(t *testing.T) {
	c := qt.New(t)
	addr, store := newScanningSMTP(t, protect.Config{})
	c.Assert(sendSMTP(t, addr, "prizes@sender.example", spamMail("spam@smtp")), qt.IsNil)
	c.Assert(sendSMTP(t, addr, "billing@sender.example", eicarMail("virus@smtp")), qt.IsNil)
	held := heldMessages(t, store)
	c.Assert(held, qt.HasLen, 2)
	reasons := map[string][]string{}
	for _, m := range held {
		reasons[m.MessageID] = m.Protection.Reasons
		c.Assert(m.Labels, qt.DeepEquals, []string{"quarantined"})
	}
	c.Assert(reasons, qt.DeepEquals, map[string][]string{"<spam@smtp>": {"spam"}, "<virus@smtp>": {"malware"}})
}

// A configured clamd that is down makes the SMTP layer answer 451: the sender retries
// later, and nothing is stored without a verdict.
func TestSMTPScannerDownAnswers451(t *testing.T) {
	c := qt.New(t)
	addr, store := newScanningSMTP(t, protect.Config{Clamd: "unix:" + filepath.Join(t.TempDir(), "no-clamd.sock")})
	err := sendSMTP(t, addr, "a@sender.example", strings.ReplaceAll(spamMail("retry@smtp"), "WINNER", "Hello"))
	var se *smtp.SMTPError
	c.Assert(errors.As(err, &se), qt.IsTrue, qt.Commentf("%v", err))
	c.Assert(se.Code, qt.Equals, 451)
	in, err := store.InboxByAddress(context.Background(), "acme", "support@"+testDomain)
	c.Assert(err, qt.IsNil)
	_, err = store.GetMessage(context.Background(), in.ID, "<retry@smtp>")
	c.Assert(db.IsCode(err, db.ECodeNotFound), qt.IsTrue)
}
