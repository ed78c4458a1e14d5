package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/server"
)

// rawSMTP opens a connection, says EHLO and starts a transaction to rcpt.
func rawSMTP(c *qt.C, addr, rcpt string) (net.Conn, *bufio.Reader) {
	conn, err := net.Dial("tcp", addr)
	c.Assert(err, qt.IsNil)
	r := bufio.NewReader(conn)
	readReply(c, r)
	fmt.Fprintf(conn, "EHLO cut.example\r\n")
	readReply(c, r)
	fmt.Fprintf(conn, "MAIL FROM:<ann@customer.example>\r\n")
	c.Assert(readReply(c, r), qt.Matches, "250 .*")
	fmt.Fprintf(conn, "RCPT TO:<%s>\r\n", rcpt)
	c.Assert(readReply(c, r), qt.Matches, "250 .*")
	return conn, r
}

// A message whose transfer the client cuts off is not stored: not when a BDAT chunk is
// shorter than announced, last or not, nor when the client hangs up after a chunk. The
// client's retry of the whole message is then stored whole, and once.
func TestSMTPCutTransferStoresNothing(t *testing.T) {
	e := newSMTPEnv(t, server.SMTPConfig{})
	msg := testMessage("cut-1", "support@inboxd.test", "Cut short")
	for name, send := range map[string]string{
		"last chunk short":     fmt.Sprintf("BDAT %d LAST\r\n%s", len(msg)+100, msg),
		"chunk short":          fmt.Sprintf("BDAT %d\r\n%s", len(msg)+100, msg),
		"no last chunk":        fmt.Sprintf("BDAT %d\r\n%s", len(msg), msg),
		"nothing of the chunk": "BDAT 100 LAST\r\n",
		"data without the end": "DATA\r\n" + string(msg),
	} {
		c := qt.New(t)
		conn, _ := rawSMTP(c, e.addr, "support@inboxd.test")
		io.WriteString(conn, send)
		conn.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, conn) // the server's answers, until it closes
		conn.Close()
		c.Assert(e.messages("support@inboxd.test"), qt.HasLen, 0, qt.Commentf("%s", name))
	}

	// Whole chunks, the last sent as the client closes its side, are stored.
	c := qt.New(t)
	conn, r := rawSMTP(c, e.addr, "support@inboxd.test")
	half := len(msg) / 2
	fmt.Fprintf(conn, "BDAT %d\r\n%s", half, msg[:half])
	c.Assert(readReply(c, r), qt.Matches, "250 .*")
	fmt.Fprintf(conn, "BDAT %d LAST\r\n%s", len(msg)-half, msg[half:])
	conn.(*net.TCPConn).CloseWrite()
	c.Assert(readReply(c, r), qt.Matches, "250 2.0.0 .*")
	conn.Close()
	got := e.messages("support@inboxd.test")
	c.Assert(got, qt.HasLen, 1)
	c.Assert(got[0].Preview, qt.Equals, "Hello, this is the body of cut-1.")
}

// Past smtpMaxBadRcpts unknown recipients, every command gets 421 until the connection
// closes, which it does by itself: no more addresses are tried, no mail goes in.
func TestSMTPTooManyUnknownRecipientsEndsTheSession(t *testing.T) {
	e := newSMTPEnv(t, server.SMTPConfig{})
	c := qt.New(t)
	conn, r := rawSMTP(c, e.addr, "support@inboxd.test")
	defer conn.Close()
	for i := range 20 {
		fmt.Fprintf(conn, "RCPT TO:<nobody%d@inboxd.test>\r\n", i)
		c.Assert(readReply(c, r), qt.Equals, "550 5.1.1 Unknown recipient")
	}
	fmt.Fprintf(conn, "RCPT TO:<nobody@inboxd.test>\r\nRCPT TO:<sales@inboxd.test>\r\n")
	for range 2 {
		c.Assert(readReply(c, r), qt.Equals, "421 4.7.0 Too many unknown recipients; closing connection")
	}
	// go-smtp answers DATA before the session sees it; the message is refused.
	fmt.Fprintf(conn, "DATA\r\n")
	c.Assert(readReply(c, r), qt.Matches, "354 .*")
	fmt.Fprintf(conn, "%s.\r\n", testMessage("cut-2", "support@inboxd.test", "After the cut"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(r)
	c.Assert(err, qt.IsNil, qt.Commentf("the server did not close the connection"))
	c.Assert(strings.TrimSpace(string(rest)), qt.Matches, "(421 4.7.0 Too many unknown recipients; closing connection)?")
	c.Assert(e.messages("support@inboxd.test"), qt.HasLen, 0)
	c.Assert(e.messages("sales@inboxd.test"), qt.HasLen, 0)
}

// A reverse path with control characters or bytes that are not UTF-8 is refused: it would
// go into the SPF check and the Received field.
func TestSMTPBadSenderRefused(t *testing.T) {
	e := newSMTPEnv(t, server.SMTPConfig{})
	c := qt.New(t)
	conn, err := net.Dial("tcp", e.addr)
	c.Assert(err, qt.IsNil)
	defer conn.Close()
	r := bufio.NewReader(conn)
	readReply(c, r)
	fmt.Fprintf(conn, "EHLO cut.example\r\n")
	readReply(c, r)
	for _, from := range []string{"a\x01b@customer.example", "a\x7fb@customer.example", "\xff\xfe@customer.example"} {
		fmt.Fprintf(conn, "MAIL FROM:<%s>\r\n", from)
		c.Assert(readReply(c, r), qt.Equals, "501 5.1.7 Bad sender address syntax", qt.Commentf("%q", from))
	}
	fmt.Fprintf(conn, "MAIL FROM:<jörg@exämple.test> SMTPUTF8\r\n")
	c.Assert(readReply(c, r), qt.Matches, "250 .*")
}
