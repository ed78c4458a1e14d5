package mail_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
)

// mutedRelay answers every command up to the end of data, then either closes the
// connection without a word (hangUp) or says nothing and keeps it open.
func mutedRelay(t *testing.T, hangUp bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
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
				if hangUp {
					return
				}
				time.Sleep(time.Minute) // the client's deadline comes first
				return
			case inData:
			case strings.HasPrefix(line, "EHLO"):
				fmt.Fprintf(conn, "250 relay.test\r\n")
			case strings.HasPrefix(line, "DATA"):
				inData = true
				fmt.Fprintf(conn, "354 go ahead\r\n")
			default:
				fmt.Fprintf(conn, "250 ok\r\n")
			}
		}
	}()
	return ln.Addr().String()
}

// A relay that closes the connection without answering the end of data did not take the
// message (one that did answers 250 first), so it is sent again; one whose answer does not
// come may hold it, so it is not.
func TestRelayClosedWithoutAnswerIsSentAgain(t *testing.T) {
	raw := []byte("From: agent@inboxd.test\r\nTo: ann@customer.example\r\nSubject: hi\r\n\r\nhello\r\n")
	for _, tt := range []struct {
		hangUp bool
		want   string
	}{
		{true, mail.Deferred},
		{false, mail.Uncertain},
	} {
		c := qt.New(t)
		r, err := mail.ParseRelay("smtp://"+mutedRelay(t, tt.hangUp)+"?tls=none", "inboxd.test")
		c.Assert(err, qt.IsNil)
		r.FinalTimeout = 300 * time.Millisecond
		res := r.Deliver(context.Background(), mail.Envelope{From: "agent@inboxd.test", To: "ann@customer.example"}, raw, func() error { return nil })
		c.Assert(res.Outcome, qt.Equals, tt.want, qt.Commentf("%+v", res))
	}
}

// Through the outbound queue: the recipient whose relay hung up at the end of data is
// deferred, sent again, and delivered once.
func TestRelayHangUpAtEndOfDataIsRetried(t *testing.T) {
	c := qt.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, qt.IsNil)
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan struct{}, 10)
	go func() {
		for i := 0; ; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func(first bool) {
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
						if first {
							return // hang up without a word
						}
						inData = false
						accepted <- struct{}{}
						fmt.Fprintf(conn, "250 queued\r\n")
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
			}(i == 0)
		}
	}()
	r, err := mail.ParseRelay("smtp://"+ln.Addr().String()+"?tls=none", "inboxd.test")
	c.Assert(err, qt.IsNil)
	t.Cleanup(func() { r.Close() })
	e := newOutEnv(t, mail.OutboundConfig{Transport: r})
	res := e.send("k1", "ann@customer.example")
	d := e.waitDelivery(res.MessageID, terminal)
	c.Assert(d.Recipients[0].Status, qt.Equals, db.RecipientDelivered, qt.Commentf("%+v", d.Recipients[0]))
	c.Assert(len(accepted), qt.Equals, 1)
}
