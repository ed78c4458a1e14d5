package server_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// Streams and waits outlive the HTTP server's WriteTimeout (which would cut their
// answer) and ReadTimeout, as main sets both; so do MCP calls of wait_for_message.
func TestStreamsAndWaitsOutliveServerTimeouts(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	srv := &http.Server{Handler: e.api, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	e.url = "http://" + ln.Addr().String()

	s := e.openStream(e.full, "")
	since := time.Now()
	m := e.ok("waitForMessages", "GET", waitPath(in, since, "&timeout=1"), e.readOnly, nil)
	qt.Assert(t, m["timedOut"], qt.Equals, true)
	res := succeeds(t, e.mcpSession(e.readOnly), "wait_for_message", map[string]any{"inboxId": in, "since": since.UTC().Format(time.RFC3339Nano), "timeout": 1})
	qt.Assert(t, res.(map[string]any)["timedOut"], qt.Equals, true)
	time.Sleep(time.Second) // past both timeouts
	e.mailTo(in, "<late@far.test>", "late")
	qt.Assert(t, messageIDOf(e.payload(s.next())), qt.Equals, "<late@far.test>")
	qt.Assert(t, s.comment(), qt.Equals, "keep-alive")
}
