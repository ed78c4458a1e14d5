package server_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	netsmtp "net/smtp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/server"
)

// TestSMTPNetSMTPClient sends with Go's net/smtp, as a program would: one message to two
// local inboxes (one named twice, one in another case) is stored once in each, parsed,
// and findable at once (the 250 came after the commit).
func TestSMTPNetSMTPClient(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	msg := testMessage("net-1", "support@inboxd.test, team@acme.example", "Hello over SMTP")
	err := netsmtp.SendMail(e.addr, nil, "ann@customer.example",
		[]string{"support@inboxd.test", "TEAM@acme.example", "support@inboxd.test"}, msg)
	c.Assert(err, qt.IsNil)

	for _, inbox := range []string{"support@inboxd.test", "team@acme.example"} {
		got := e.messages(inbox)
		c.Assert(got, qt.HasLen, 1, qt.Commentf("inbox %s", inbox))
		m := got[0]
		c.Check(m.MessageID, qt.Equals, "<net-1@customer.example>")
		c.Check(m.From, qt.Equals, "ann@customer.example")
		c.Check(m.To, qt.DeepEquals, []string{"support@inboxd.test", "team@acme.example"})
		c.Check(m.Subject, qt.Equals, "Hello over SMTP")
		c.Check(m.Preview, qt.Equals, "Hello, this is the body of net-1.")
		c.Check(m.Labels, qt.DeepEquals, []string{"received", "unread"})
		c.Check(m.Triage, qt.DeepEquals, &db.Triage{Status: db.TriagePending})
	}
	// The same message again (a sender retrying after a lost answer) is stored once.
	c.Assert(netsmtp.SendMail(e.addr, nil, "ann@customer.example", []string{"support@inboxd.test"}, msg), qt.IsNil)
	c.Assert(e.messages("support@inboxd.test"), qt.HasLen, 1)
}

// TestSMTPGoSMTPClient talks to the listener with go-smtp's client: the advertised
// extensions, an 8-bit UTF-8 message with SMTPUTF8, a reply that joins its thread, and a
// pipelined transaction (commands sent before their answers are read).
func TestSMTPGoSMTPClient(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	cl, err := smtp.Dial(e.addr)
	c.Assert(err, qt.IsNil)
	defer cl.Close()
	c.Assert(cl.Hello("client.example"), qt.IsNil)
	for _, ext := range []string{"PIPELINING", "8BITMIME", "SMTPUTF8", "ENHANCEDSTATUSCODES"} {
		ok, _ := cl.Extension(ext)
		c.Check(ok, qt.IsTrue, qt.Commentf("extension %s", ext))
	}
	ok, size := cl.Extension("SIZE")
	c.Check(ok, qt.IsTrue)
	c.Check(size, qt.Equals, "26214400")
	ok, _ = cl.Extension("STARTTLS")
	c.Check(ok, qt.IsFalse) // no certificate configured
	ok, _ = cl.Extension("AUTH")
	c.Check(ok, qt.IsFalse) // inbound only: nothing to log in to

	first := "From: Jörg <jörg@exämple.test>\r\nTo: support@inboxd.test\r\nSubject: Grüße\r\nMessage-ID: <u1@customer.example>\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nSchöne Grüße aus München\r\n"
	c.Assert(cl.SendMail("jörg@exämple.test", []string{"support@inboxd.test"}, strings.NewReader(first)), qt.IsNil)
	reply := "From: support@inboxd.test\r\nTo: jörg@exämple.test\r\nSubject: Re: Grüße\r\nMessage-ID: <u2@customer.example>\r\n" +
		"In-Reply-To: <u1@customer.example>\r\nReferences: <u1@customer.example>\r\n\r\nDanke!\r\n"
	c.Assert(cl.SendMail("ann@customer.example", []string{"support@inboxd.test"}, strings.NewReader(reply)), qt.IsNil)
	c.Assert(cl.Quit(), qt.IsNil)

	got := e.messages("support@inboxd.test")
	c.Assert(got, qt.HasLen, 2)
	c.Check(got[1].Subject, qt.Equals, "Grüße")
	c.Check(got[1].From, qt.Equals, "jörg@exämple.test")
	c.Check(got[1].Preview, qt.Equals, "Schöne Grüße aus München")
	c.Check(got[0].ThreadID, qt.Equals, got[1].ThreadID) // threaded by In-Reply-To/References

	// Pipelining (RFC 2920): the whole transaction in one write.
	conn, err := net.Dial("tcp", e.addr)
	c.Assert(err, qt.IsNil)
	defer conn.Close()
	r := bufio.NewReader(conn)
	readReply(c, r) // greeting
	fmt.Fprintf(conn, "EHLO pipe.example\r\n")
	readReply(c, r)
	fmt.Fprintf(conn, "MAIL FROM:<ann@customer.example>\r\nRCPT TO:<sales@inboxd.test>\r\nRCPT TO:<nobody@inboxd.test>\r\nDATA\r\n")
	c.Check(readReply(c, r), qt.Matches, "250 .*")
	c.Check(readReply(c, r), qt.Matches, "250 .*")
	c.Check(readReply(c, r), qt.Equals, "550 5.1.1 Unknown recipient")
	c.Check(readReply(c, r), qt.Matches, "354 .*")
	fmt.Fprintf(conn, "%s.\r\nQUIT\r\n", testMessage("pipe-1", "sales@inboxd.test", "Pipelined"))
	c.Check(readReply(c, r), qt.Matches, "250 2.0.0 .*")
	c.Check(readReply(c, r), qt.Matches, "221 .*")
	c.Assert(e.messages("sales@inboxd.test"), qt.HasLen, 1)
}

// readReply reads one (possibly multi-line) SMTP reply and returns its last line.
func readReply(c *qt.C, r *bufio.Reader) string {
	c.Helper()
	for {
		line, err := r.ReadString('\n')
		c.Assert(err, qt.IsNil)
		line = strings.TrimRight(line, "\r\n")
		if len(line) < 4 || line[3] != '-' {
			return line
		}
	}
}

// TestSMTPRecipients checks every answer to RCPT: the listener is never an open relay.
func TestSMTPRecipients(t *testing.T) {
	e := newSMTPEnv(t, server.SMTPConfig{})
	ctx := context.Background()
	_, err := db.CreateInbox(ctx, e.store, db.NewInbox{AccountID: "acme", Address: "later@inboxd.test", DefaultDomain: testDomain,
		DeliveryStatus: db.DeliveryPending, Seeding: true})
	qt.Assert(t, err, qt.IsNil)
	gone, err := db.CreateInbox(ctx, e.store, db.NewInbox{AccountID: "acme", Address: "gone@inboxd.test", DefaultDomain: testDomain})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, e.store.DeleteInbox(ctx, gone), qt.IsNil)

	tests := []struct {
		rcpt string
		code int
		enh  smtp.EnhancedCode
	}{
		{"support@inboxd.test", 250, smtp.EnhancedCode{2, 0, 0}},
		{"Support@InboxD.Test", 250, smtp.EnhancedCode{2, 0, 0}},
		{"team@acme.example", 250, smtp.EnhancedCode{2, 0, 0}},
		{"nobody@inboxd.test", 550, smtp.EnhancedCode{5, 1, 1}},
		{"gone@inboxd.test", 550, smtp.EnhancedCode{5, 1, 6}},
		{"later@inboxd.test", 450, smtp.EnhancedCode{4, 2, 1}},
		// Open relay attempts: any other domain, including look-alikes of ours.
		{"someone@gmail.com", 550, smtp.EnhancedCode{5, 7, 1}},
		{"support@inboxd.test.evil.example", 550, smtp.EnhancedCode{5, 7, 1}},
		{"support@sub.inboxd.test", 550, smtp.EnhancedCode{5, 7, 1}},
		{"\"support@inboxd.test\"@evil.example", 550, smtp.EnhancedCode{5, 7, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.rcpt, func(t *testing.T) {
			c := qt.New(t)
			cl, err := smtp.Dial(e.addr)
			c.Assert(err, qt.IsNil)
			defer cl.Close()
			c.Assert(cl.Mail("ann@customer.example", nil), qt.IsNil)
			err = cl.Rcpt(tt.rcpt, nil)
			if tt.code == 250 {
				c.Assert(err, qt.IsNil)
				return
			}
			var se *smtp.SMTPError
			c.Assert(errors.As(err, &se), qt.IsTrue, qt.Commentf("%v", err))
			c.Check(se.Code, qt.Equals, tt.code)
			c.Check(se.EnhancedCode, qt.Equals, tt.enh)
		})
	}

	// A relay attempt never gets as far as DATA, so nothing is stored anywhere.
	c := qt.New(t)
	err = netsmtp.SendMail(e.addr, nil, "spammer@evil.example", []string{"victim@gmail.com"}, testMessage("relay-1", "victim@gmail.com", "Buy"))
	c.Assert(err, qt.ErrorMatches, `550 "?5.7.1 Relaying denied.*`)
}

// TestSMTPSizeLimit refuses a message over the limit, announced (MAIL SIZE=) or not.
func TestSMTPSizeLimit(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{MaxMessageBytes: 4096})
	cl, err := smtp.Dial(e.addr)
	c.Assert(err, qt.IsNil)
	defer cl.Close()
	err = cl.Mail("ann@customer.example", &smtp.MailOptions{Size: 5000})
	c.Assert(err, qt.ErrorMatches, ".*552.*")

	big := testMessage("big-1", "support@inboxd.test", "Big")
	big = append(big, []byte(strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\r\n", 80))...)
	err = cl.SendMail("ann@customer.example", []string{"support@inboxd.test"}, strings.NewReader(string(big)))
	var se *smtp.SMTPError
	c.Assert(errors.As(err, &se), qt.IsTrue, qt.Commentf("%v", err))
	c.Check(se.Code, qt.Equals, 552)
	c.Check(se.Message, qt.Equals, "Message too large")
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 0)

	// The session goes on: a small message is accepted.
	c.Assert(cl.SendMail("ann@customer.example", []string{"support@inboxd.test"}, strings.NewReader(string(testMessage("small-1", "x", "Small")))), qt.IsNil)
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 1)
}

// TestSMTPStoreFailureAnswers451 never acknowledges mail it could not store.
func TestSMTPStoreFailureAnswers451(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	cl, err := smtp.Dial(e.addr)
	c.Assert(err, qt.IsNil)
	defer cl.Close()
	c.Assert(cl.Mail("ann@customer.example", nil), qt.IsNil)
	c.Assert(cl.Rcpt("support@inboxd.test", nil), qt.IsNil)
	e.store.Close() // storage goes away between RCPT and the end of DATA
	w, err := cl.Data()
	c.Assert(err, qt.IsNil)
	_, err = w.Write(testMessage("lost-1", "support@inboxd.test", "x"))
	c.Assert(err, qt.IsNil)
	err = w.Close()
	var se *smtp.SMTPError
	c.Assert(errors.As(err, &se), qt.IsTrue, qt.Commentf("%v", err))
	c.Check(se.Code, qt.Equals, 451)
	c.Check(se.EnhancedCode, qt.Equals, smtp.EnhancedCode{4, 3, 0})
}

// TestSMTPInboxDeletedDuringData: an inbox deleted between RCPT and the end of DATA gets
// no copy (mail is never stored in a deleted inbox); the other recipients get theirs, and
// with none left the message is refused as RCPT would now refuse it.
func TestSMTPInboxDeletedDuringData(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	ctx := context.Background()
	deliver := func(id string, rcpts []string, gone *db.Inbox) error {
		cl, err := smtp.Dial(e.addr)
		c.Assert(err, qt.IsNil)
		defer cl.Close()
		c.Assert(cl.Mail("ann@customer.example", nil), qt.IsNil)
		for _, r := range rcpts {
			c.Assert(cl.Rcpt(r, nil), qt.IsNil)
		}
		c.Assert(e.store.DeleteInbox(ctx, gone), qt.IsNil)
		w, err := cl.Data()
		c.Assert(err, qt.IsNil)
		_, err = w.Write(testMessage(id, rcpts[0], "x"))
		c.Assert(err, qt.IsNil)
		return w.Close()
	}
	left := func(in *db.Inbox) []db.Message {
		msgs, _, err := e.store.ListMessages(ctx, in.ID, db.MessageFilter{}, 10, "")
		c.Assert(err, qt.IsNil)
		return msgs
	}

	sales := e.inbox("sales@inboxd.test")
	c.Assert(deliver("both-1", []string{"support@inboxd.test", "sales@inboxd.test"}, sales), qt.IsNil)
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 1)
	c.Check(left(sales), qt.HasLen, 0)

	team := e.inbox("team@acme.example")
	err := deliver("gone-1", []string{"team@acme.example"}, team)
	var se *smtp.SMTPError
	c.Assert(errors.As(err, &se), qt.IsTrue, qt.Commentf("%v", err))
	c.Check(se.Code, qt.Equals, 550)
	c.Check(se.EnhancedCode, qt.Equals, smtp.EnhancedCode{5, 1, 6})
	c.Check(left(team), qt.HasLen, 0)
}

// TestSMTPEmptyMessage refuses a message with nothing in it.
func TestSMTPEmptyMessage(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	err := netsmtp.SendMail(e.addr, nil, "ann@customer.example", []string{"support@inboxd.test"}, []byte("\r\n"))
	c.Assert(err, qt.ErrorMatches, `554 "?5.6.0 Message is empty"?`)
}

// TestSMTPConcurrentDeliveries stores every acknowledged message when many sessions
// deliver at once (their commits are shared).
func TestSMTPConcurrentDeliveries(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	const conns, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := smtp.Dial(e.addr)
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for j := range each {
				id := fmt.Sprintf("c%d-%d", i, j)
				rcpts := []string{"support@inboxd.test"}
				if j%3 == 0 {
					rcpts = append(rcpts, "sales@inboxd.test")
				}
				if err := cl.SendMail("ann@customer.example", rcpts, strings.NewReader(string(testMessage(id, "support@inboxd.test", id)))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		c.Fatal(err)
	}
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, conns*each)
	c.Check(e.messages("sales@inboxd.test"), qt.HasLen, conns*5)
}

// TestSMTPConnectionLimit answers 421 to a connection over the limit.
func TestSMTPConnectionLimit(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{MaxConnections: 2})
	var open []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", e.addr)
		c.Assert(err, qt.IsNil)
		defer conn.Close()
		c.Assert(readReply(c, bufio.NewReader(conn)), qt.Matches, "220 .*")
		open = append(open, conn)
	}
	conn, err := net.Dial("tcp", e.addr)
	c.Assert(err, qt.IsNil)
	defer conn.Close()
	c.Assert(readReply(c, bufio.NewReader(conn)), qt.Equals, "421 4.7.0 Too many connections; try again later")
	open[0].Close()
	// The freed slot is available again.
	awaitSlot(c, func() net.Conn { return dialFrom(c, "127.0.0.1", e.addr) })
}

// TestSMTPIdleTimeout closes a connection that stops talking.
func TestSMTPIdleTimeout(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{IdleTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", e.addr)
	c.Assert(err, qt.IsNil)
	defer conn.Close()
	r := bufio.NewReader(conn)
	readReply(c, r)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Assert(readReply(c, r), qt.Matches, "421 4.4.2 .*")
}

// TestSMTPLongLine refuses a line over the limit without storing anything.
func TestSMTPLongLine(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	msg := string(testMessage("long-1", "support@inboxd.test", "Long")) + strings.Repeat("x", 20<<10) + "\r\n"
	err := netsmtp.SendMail(e.addr, nil, "ann@customer.example", []string{"support@inboxd.test"}, []byte(msg))
	c.Assert(err, qt.Not(qt.IsNil))
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 0)
	// A long line below the limit (unwrapped HTML, as real senders write) is fine.
	ok := string(testMessage("long-2", "support@inboxd.test", "Long")) + strings.Repeat("x", 8<<10) + "\r\n"
	c.Assert(netsmtp.SendMail(e.addr, nil, "ann@customer.example", []string{"support@inboxd.test"}, []byte(ok)), qt.IsNil)
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 1)
}

// TestSMTPStartTLS upgrades the session with the configured certificate and delivers.
func TestSMTPStartTLS(t *testing.T) {
	c := qt.New(t)
	cert, pool := selfSigned(c, "mx.inboxd.test")
	e := newSMTPEnv(t, server.SMTPConfig{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	cl, err := smtp.DialStartTLS(e.addr, &tls.Config{RootCAs: pool, ServerName: "mx.inboxd.test"})
	c.Assert(err, qt.IsNil)
	defer cl.Close()
	_, secure := cl.TLSConnectionState()
	c.Assert(secure, qt.IsTrue)
	c.Assert(cl.SendMail("ann@customer.example", []string{"support@inboxd.test"}, strings.NewReader(string(testMessage("tls-1", "support@inboxd.test", "Secret")))), qt.IsNil)
	c.Assert(e.messages("support@inboxd.test"), qt.HasLen, 1)

	// net/smtp upgrades by itself when STARTTLS is offered.
	err = netsmtp.SendMail(e.addr, nil, "ann@customer.example", []string{"support@inboxd.test"}, testMessage("tls-2", "x", "y"))
	c.Assert(err, qt.ErrorMatches, ".*certificate.*") // the test certificate is not trusted by default
}

func selfSigned(c *qt.C, host string) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	c.Assert(err, qt.IsNil)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	c.Assert(err, qt.IsNil)
	leaf, err := x509.ParseCertificate(der)
	c.Assert(err, qt.IsNil)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestSMTPShutdownDrains lets a message in transfer finish and get its 250 while idle
// sessions are closed with 421 and new ones are refused.
func TestSMTPShutdownDrains(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{})
	busy, err := smtp.Dial(e.addr)
	c.Assert(err, qt.IsNil)
	defer busy.Close()
	c.Assert(busy.Mail("ann@customer.example", nil), qt.IsNil)
	c.Assert(busy.Rcpt("support@inboxd.test", nil), qt.IsNil)
	w, err := busy.Data()
	c.Assert(err, qt.IsNil)
	msg := testMessage("drain-1", "support@inboxd.test", "In flight")
	_, err = w.Write(msg[:40])
	c.Assert(err, qt.IsNil)

	idle, err := net.Dial("tcp", e.addr)
	c.Assert(err, qt.IsNil)
	defer idle.Close()
	idleR := bufio.NewReader(idle)
	readReply(c, idleR)

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- e.srv.Shutdown(ctx)
	}()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Assert(readReply(c, idleR), qt.Matches, "421 .*")

	time.Sleep(100 * time.Millisecond) // the shutdown is under way; the transfer goes on
	_, err = w.Write(msg[40:])
	c.Assert(err, qt.IsNil)
	c.Assert(w.Close(), qt.IsNil) // 250: stored
	busy.Quit()
	select {
	case err := <-stopped:
		c.Assert(err, qt.IsNil)
	case <-time.After(10 * time.Second):
		c.Fatal("shutdown did not finish")
	}
	c.Assert(e.messages("support@inboxd.test"), qt.HasLen, 1)
	_, err = net.DialTimeout("tcp", e.addr, time.Second)
	c.Assert(err, qt.Not(qt.IsNil)) // no longer listening
}
