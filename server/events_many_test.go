package server_test

import (
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// Many idle streams and waits at once: each gets its event or its answer when mail
// comes. No timing is asserted, only that nothing breaks.
func TestManyIdleStreamsAndWaits(t *testing.T) {
	const n = 200
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	since := time.Now().Add(-time.Second)
	streams := make([]*sseStream, n)
	for i := range streams {
		streams[i] = e.openStream(e.readOnly, "")
	}
	waits := make([]<-chan map[string]any, n)
	for i := range waits {
		waits[i] = e.startWait(e.readOnly, waitPath(in, since, "&timeout=60"))
	}
	e.eventually("every wait to start", func() bool { return e.waiting(n) })
	e.mailTo(in, "<a@far.test>", "for everyone")
	for _, s := range streams {
		qt.Assert(t, messageIDOf(e.payload(s.next())), qt.Equals, "<a@far.test>")
	}
	for _, w := range waits {
		qt.Assert(t, ids(answered(t, w), "messages"), qt.DeepEquals, []string{"<a@far.test>"})
	}
}
