package server

import (
	"net"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// TestRepliesGoOutWhenTheSessionReads checks slotConn's reply buffering (RFC 2920 section
// 3.2): replies written between two reads reach the client as one write when the session
// reads again, and a close sends what is pending. net.Pipe makes this exact: a write
// there blocks until the other end reads, and one read returns data of one write only.
func TestRepliesGoOutWhenTheSessionReads(t *testing.T) {
	client, srv := net.Pipe()
	defer client.Close()
	sc := &slotConn{Conn: srv, release: func() {}}
	// Were the replies written through at once, these would fail at the deadline: nobody
	// reads the pipe yet.
	qt.Assert(t, srv.SetWriteDeadline(time.Now().Add(time.Second)), qt.IsNil)
	for _, r := range []string{"250 2.0.0 Roger\r\n", "250 2.0.0 I'll make sure it gets there\r\n", "354 2.0.0 Go ahead\r\n"} {
		_, err := sc.Write([]byte(r))
		qt.Assert(t, err, qt.IsNil)
	}
	qt.Assert(t, srv.SetWriteDeadline(time.Time{}), qt.IsNil)

	got := make(chan string, 1)
	go func() {
		b := make([]byte, 512)
		n, _ := client.Read(b)
		got <- string(b[:n])
		client.Write([]byte("Subject: hi\r\n"))
	}()
	b := make([]byte, 64)
	n, err := sc.Read(b)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, string(b[:n]), qt.Equals, "Subject: hi\r\n")
	qt.Assert(t, <-got, qt.Equals, "250 2.0.0 Roger\r\n250 2.0.0 I'll make sure it gets there\r\n354 2.0.0 Go ahead\r\n")

	// Closing sends the last reply before the connection goes.
	go func() {
		b := make([]byte, 512)
		n, _ := client.Read(b)
		got <- string(b[:n])
	}()
	sc.Write([]byte("221 2.0.0 Bye\r\n"))
	qt.Assert(t, sc.Close(), qt.IsNil)
	qt.Assert(t, <-got, qt.Equals, "221 2.0.0 Bye\r\n")
}
