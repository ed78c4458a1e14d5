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

// A client that sends but never reads leaves the session stuck in a write of its replies;
// closing the connection (a timer for a misbehaving session, or shutdown) must not wait
// for that write, and ends it.
func TestCloseDoesNotWaitForAStuckWrite(t *testing.T) {
	client, srv := net.Pipe()
	defer client.Close()
	sc := &slotConn{Conn: srv, release: func() {}}
	sc.Write([]byte("500 5.5.2 Error: bad syntax\r\n"))
	readDone := make(chan error, 1)
	go func() {
		_, err := sc.Read(make([]byte, 16)) // flushes first: blocks, nobody reads the pipe
		readDone <- err
	}()
	// Let the session goroutine get into its write (if it has not, Close flushes itself,
	// within its one-second deadline).
	time.Sleep(50 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		sc.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a write the client never reads")
	}
	select {
	case err := <-readDone:
		qt.Assert(t, err, qt.IsNotNil)
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck write did not end when the connection closed")
	}
}
