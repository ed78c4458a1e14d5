package server_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/server"
)

// dialFrom connects to addr from the loopback address ip (Linux routes all of 127/8 to
// the loopback interface), so one test can be several clients.
func dialFrom(c *qt.C, ip, addr string) net.Conn {
	c.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	c.Assert(err, qt.IsNil)
	return conn
}

// greeted connects from ip and says EHLO.
func greeted(c *qt.C, ip, addr string) (net.Conn, *bufio.Reader) {
	c.Helper()
	conn := dialFrom(c, ip, addr)
	r := bufio.NewReader(conn)
	c.Assert(readReply(c, r), qt.Matches, "220 .*")
	fmt.Fprintf(conn, "EHLO client.example\r\n")
	c.Assert(readReply(c, r), qt.Matches, "250 .*")
	return conn, r
}

// keepTalking sends cmds in turn, one at a time, as a client holding its connection
// open would, until the server speaks unasked (waiting 50 ms between commands for that)
// or for at most within. It returns that reply, "" if none came.
func keepTalking(c *qt.C, conn net.Conn, r *bufio.Reader, within time.Duration, cmds ...string) string {
	c.Helper()
	for end, i := time.Now().Add(within), 0; time.Now().Before(end); i++ {
		conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := r.Peek(1)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err == nil {
			return readReply(c, r)
		}
		fmt.Fprintf(conn, "%s\r\n", cmds[i%len(cmds)])
		if line := readReply(c, r); strings.HasPrefix(line, "421 ") {
			return line
		}
	}
	return ""
}

// assertClosed checks that the server closed the connection after its last reply.
func assertClosed(c *qt.C, conn net.Conn, r *bufio.Reader) {
	c.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	rest, err := io.ReadAll(r)
	c.Assert(err, qt.IsNil)
	c.Assert(string(rest), qt.Equals, "")
}

// TestSMTPPerAddressLimit: a client holding its share of the connections with NOOPs does
// not stop another client's mail, and its next connection is refused with 421 and a reason.
// A freed connection can be used again.
func TestSMTPPerAddressLimit(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{MaxPerAddress: 2})
	var held []net.Conn
	for range 2 {
		conn, r := greeted(c, "127.0.0.1", e.addr)
		defer conn.Close()
		fmt.Fprintf(conn, "NOOP\r\n")
		c.Assert(readReply(c, r), qt.Matches, "250 .*")
		held = append(held, conn)
	}
	conn := dialFrom(c, "127.0.0.1", e.addr)
	defer conn.Close()
	c.Assert(readReply(c, bufio.NewReader(conn)), qt.Equals, "421 4.7.0 Too many connections from your address; try again later")

	// Another client delivers meanwhile.
	other := dialFrom(c, "127.0.0.2", e.addr)
	cl := smtp.NewClient(other)
	defer cl.Close()
	c.Assert(cl.SendMail("ann@customer.example", []string{"support@inboxd.test"},
		strings.NewReader(string(testMessage("other-1", "support@inboxd.test", "From elsewhere")))), qt.IsNil)
	c.Assert(cl.Quit(), qt.IsNil)
	c.Assert(e.messages("support@inboxd.test"), qt.HasLen, 1)

	// The first client's slot comes back once it closes one of its connections.
	held[0].Close()
	awaitSlot(c, func() net.Conn { return dialFrom(c, "127.0.0.1", e.addr) })
}

// awaitSlot checks that a connection dial makes is greeted within seconds: a slot was
// freed (the server notices a closed connection a little later).
func awaitSlot(c *qt.C, dial func() net.Conn) {
	c.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn := dial()
		line := readReply(c, bufio.NewReader(conn))
		conn.Close()
		if strings.HasPrefix(line, "220 ") {
			return
		}
		c.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("slot never freed: %s", line))
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSMTPTalkingDoesNotHoldASlot: a client cannot keep its connection by talking.
// Commands that move no mail forward (NOOP, RSET, VRFY, HELP, EHLO again) do not extend
// the idle timeout, and not even MAIL commands extend a session past its time limit: the
// client is told which limit with 421 and disconnected. A sender delivering message after
// message is not cut off by the idle timeout.
func TestSMTPTalkingDoesNotHoldASlot(t *testing.T) {
	const limit = 400 * time.Millisecond
	for _, tt := range []struct {
		name string
		cfg  server.SMTPConfig
		cmds []string
		want string
	}{
		{"noop loop", server.SMTPConfig{IdleTimeout: limit},
			[]string{"NOOP", "RSET", "VRFY support@inboxd.test", "HELP", "EHLO client.example"},
			"421 4.4.2 Idle timeout: no mail transaction progress; closing connection"},
		// MAIL counts as progress, so the idle timeout is not what ends this session.
		{"max session", server.SMTPConfig{MaxSession: limit},
			[]string{"MAIL FROM:<ann@customer.example>", "NOOP"},
			"421 4.4.2 Session time limit reached; reconnect to send more"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := qt.New(t)
			e := newSMTPEnv(t, tt.cfg)
			conn, r := greeted(c, "127.0.0.1", e.addr)
			defer conn.Close()
			start := time.Now()
			c.Assert(keepTalking(c, conn, r, 10*limit, tt.cmds...), qt.Equals, tt.want)
			c.Check(time.Since(start) < 4*limit, qt.IsTrue, qt.Commentf("closed after %v", time.Since(start)))
			assertClosed(c, conn, r)
		})
	}

	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{IdleTimeout: limit})
	cl, err := smtp.Dial(e.addr)
	c.Assert(err, qt.IsNil)
	defer cl.Close()
	for i, end := 0, time.Now().Add(3*limit); time.Now().Before(end); i++ {
		id := fmt.Sprintf("busy-%d", i)
		c.Assert(cl.SendMail("ann@customer.example", []string{"support@inboxd.test"},
			strings.NewReader(string(testMessage(id, "support@inboxd.test", id)))), qt.IsNil)
		time.Sleep(limit / 4)
	}
	c.Assert(cl.Quit(), qt.IsNil)
}

// TestSMTPMaxSessionOverTLS: after STARTTLS the reason for the close arrives encrypted,
// like every other reply.
func TestSMTPMaxSessionOverTLS(t *testing.T) {
	c := qt.New(t)
	const maxSession = time.Second
	cert, pool := selfSigned(c, "mx.inboxd.test")
	e := newSMTPEnv(t, server.SMTPConfig{MaxSession: maxSession, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	conn, r := greeted(c, "127.0.0.1", e.addr)
	defer conn.Close()
	fmt.Fprintf(conn, "STARTTLS\r\n")
	c.Assert(readReply(c, r), qt.Matches, "220 .*")
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "mx.inboxd.test"})
	c.Assert(tc.Handshake(), qt.IsNil)
	tr := bufio.NewReader(tc)
	fmt.Fprintf(tc, "EHLO client.example\r\n")
	c.Assert(readReply(c, tr), qt.Matches, "250 .*")
	line := keepTalking(c, tc, tr, 5*maxSession, "NOOP")
	c.Assert(line, qt.Equals, "421 4.4.2 Session time limit reached; reconnect to send more")
}

// TestSMTPMaxSessionFinishesMessage: a message whose data is arriving when the session
// reaches its time limit is received, stored and answered 250; then the session is
// closed with 421.
func TestSMTPMaxSessionFinishesMessage(t *testing.T) {
	c := qt.New(t)
	const maxSession = 600 * time.Millisecond
	e := newSMTPEnv(t, server.SMTPConfig{MaxSession: maxSession})
	conn, r := rawSMTP(c, e.addr, "support@inboxd.test")
	defer conn.Close()
	fmt.Fprintf(conn, "DATA\r\n")
	c.Assert(readReply(c, r), qt.Matches, "354 .*")
	msg := testMessage("late-1", "support@inboxd.test", "Under way at the limit")
	conn.Write(msg[:40])
	time.Sleep(2 * maxSession)
	fmt.Fprintf(conn, "%s.\r\n", msg[40:])
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Assert(readReply(c, r), qt.Matches, "250 2.0.0 .*")
	c.Assert(readReply(c, r), qt.Equals, "421 4.4.2 Session time limit reached; reconnect to send more")
	assertClosed(c, conn, r)
	got := e.messages("support@inboxd.test")
	c.Assert(got, qt.HasLen, 1)
	c.Check(got[0].Subject, qt.Equals, "Under way at the limit")
}

// TestSMTPMaxSessionBoundsSlowTransfer: a transfer that keeps trickling in cannot hold the
// connection past the session's limit plus one idle timeout. It is answered 421, a
// temporary failure the sender retries, and nothing of it is stored.
func TestSMTPMaxSessionBoundsSlowTransfer(t *testing.T) {
	c := qt.New(t)
	const maxSession, idle = 600 * time.Millisecond, 2 * time.Second
	e := newSMTPEnv(t, server.SMTPConfig{MaxSession: maxSession, IdleTimeout: idle})
	conn, r := rawSMTP(c, e.addr, "support@inboxd.test")
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "DATA\r\n")
	c.Assert(readReply(c, r), qt.Matches, "354 .*")
	fmt.Fprintf(conn, "%s", testMessage("slow-1", "support@inboxd.test", "Trickled"))
	// 80 KB every tenth of a second, for longer than the limits allow, until the server
	// speaks: never idle for long.
	chunk := strings.Repeat(strings.Repeat("x", 998)+"\r\n", 80)
	for time.Since(start) < 2*(maxSession+idle) {
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := r.Peek(1); err == nil {
			break
		}
		io.WriteString(conn, chunk)
	}
	fmt.Fprintf(conn, ".\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Assert(readReply(c, r), qt.Equals, "421 4.4.2 Session time limit reached; reconnect to send more")
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 0)
}

// TestSMTPStalledTransferGets421: a transfer that stops mid-message is answered with a
// temporary failure (the sender retries it later), not stored, and the connection closed.
func TestSMTPStalledTransferGets421(t *testing.T) {
	c := qt.New(t)
	e := newSMTPEnv(t, server.SMTPConfig{IdleTimeout: 500 * time.Millisecond})
	conn, r := rawSMTP(c, e.addr, "support@inboxd.test")
	defer conn.Close()
	fmt.Fprintf(conn, "DATA\r\n")
	c.Assert(readReply(c, r), qt.Matches, "354 .*")
	conn.Write(testMessage("stalled-1", "support@inboxd.test", "Stalled")[:40])
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	c.Assert(readReply(c, r), qt.Equals, "421 4.4.2 Idle timeout: no mail transaction progress; closing connection")
	assertClosed(c, conn, r)
	c.Check(e.messages("support@inboxd.test"), qt.HasLen, 0)
}
