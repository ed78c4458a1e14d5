package mail_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
)

// Answers of scriptedRelay at the end of data.
const (
	hangUp  = ""  // close the connection without a word
	silence = "-" // say nothing, keep the connection open
)

// scriptedRelay answers every command up to the end of data, and then what atEnd says for
// the n-th connection (from 0).
func scriptedRelay(t *testing.T, atEnd func(n int) string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 0; ; n++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go serveScripted(conn, atEnd(n))
		}
	}()
	return ln.Addr().String()
}

func serveScripted(conn net.Conn, atEnd string) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	fmt.Fprintf(conn, "220 relay.test ESMTP\r\n")
	inData := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch {
		case inData && line == ".\r\n":
			switch atEnd {
			case hangUp:
				return
			case silence:
				time.Sleep(time.Minute) // the client's deadline comes first
				return
			}
			inData = false
			fmt.Fprintf(conn, "%s\r\n", atEnd)
		case inData:
		case strings.HasPrefix(line, "EHLO"):
			fmt.Fprintf(conn, "250 relay.test\r\n")
		case strings.HasPrefix(line, "DATA"):
			inData = true
			fmt.Fprintf(conn, "354 go ahead\r\n")
		case strings.HasPrefix(line, "QUIT"):
			fmt.Fprintf(conn, "221 bye\r\n")
			return
		default:
			fmt.Fprintf(conn, "250 ok\r\n")
		}
	}
}

// A relay that closes the connection without answering the end of data did not take the
// message (one that did answers 250 first), so it is sent again; one whose answer does not
// come may hold it, so it is not.
func TestRelayClosedWithoutAnswerIsSentAgain(t *testing.T) {
	raw := []byte("From: agent@inboxd.test\r\nTo: ann@customer.example\r\nSubject: hi\r\n\r\nhello\r\n")
	for atEnd, want := range map[string]string{hangUp: mail.Deferred, silence: mail.Uncertain} {
		c := qt.New(t)
		addr := scriptedRelay(t, func(int) string { return atEnd })
		r, err := mail.ParseRelay("smtp://"+addr+"?tls=none", "inboxd.test")
		c.Assert(err, qt.IsNil)
		r.FinalTimeout = 300 * time.Millisecond
		res := r.Deliver(context.Background(), mail.Envelope{From: "agent@inboxd.test", To: "ann@customer.example"}, raw, func() error { return nil })
		c.Assert(res.Outcome, qt.Equals, want, qt.Commentf("%+v", res))
	}
}

// Through the outbound queue: the recipient whose relay hung up at the end of data is
// deferred, sent again, and delivered once.
func TestRelayHangUpAtEndOfDataIsRetried(t *testing.T) {
	c := qt.New(t)
	addr := scriptedRelay(t, func(n int) string {
		if n == 0 {
			return hangUp
		}
		return "250 queued"
	})
	r, err := mail.ParseRelay("smtp://"+addr+"?tls=none", "inboxd.test")
	c.Assert(err, qt.IsNil)
	t.Cleanup(func() { r.Close() })
	e := newOutEnv(t, mail.OutboundConfig{Transport: r})
	res := e.send("k1", "ann@customer.example")
	d := e.waitDelivery(res.MessageID, terminal)
	c.Assert(d.Recipients[0].Status, qt.Equals, db.RecipientDelivered, qt.Commentf("%+v", d.Recipients[0]))
	c.Assert(d.Recipients[0].SMTPStatusCode, qt.Equals, "250")
}

// When the relay has closed the idle connections (its idle timeout, or a restart), the
// next message finds the first one dead and goes out on a fresh connection, not on the
// next dead one.
func TestRelayClosedIdleConnectionsAreNotRetried(t *testing.T) {
	c := qt.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, qt.IsNil)
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go serveScripted(conn, "250 ok")
		}
	}()
	r, err := mail.ParseRelay("smtp://"+ln.Addr().String()+"?tls=none", "inboxd.test")
	c.Assert(err, qt.IsNil)
	t.Cleanup(func() { r.Close() })
	raw := []byte("From: agent@inboxd.test\r\nTo: ann@customer.example\r\nSubject: hi\r\n\r\nhello\r\n")
	env := mail.Envelope{From: "agent@inboxd.test", To: "ann@customer.example"}

	// Two messages at once leave two idle connections.
	first, second := make(chan struct{}), make(chan mail.Result, 1)
	go func() {
		second <- r.Deliver(context.Background(), env, raw, func() error { <-first; return nil })
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(conns)
		mu.Unlock()
		if n == 1 {
			break
		}
		c.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("the first message never connected"))
	}
	res := r.Deliver(context.Background(), env, raw, func() error { return nil })
	c.Assert(res.Outcome, qt.Equals, mail.Delivered, qt.Commentf("%+v", res))
	close(first)
	res = <-second
	c.Assert(res.Outcome, qt.Equals, mail.Delivered, qt.Commentf("%+v", res))

	mu.Lock()
	c.Assert(conns, qt.HasLen, 2)
	for _, conn := range conns {
		conn.Close()
	}
	mu.Unlock()
	res = r.Deliver(context.Background(), env, raw, func() error { return nil })
	c.Assert(res.Outcome, qt.Equals, mail.Delivered, qt.Commentf("%+v", res))
}
