package server_test

import (
	"bufio"
	"fmt"
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
