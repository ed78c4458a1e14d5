package db

import (
	"fmt"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// Arrivals keep a moment's worth of messages: the newest within their bounds, each with
// the inbox's address its event names, and never one too large to be worth keeping.
func TestArrivalsKeepTheNewestWithinBounds(t *testing.T) {
	c := qt.New(t)
	var a Arrivals
	for i := range arrivalsMax + 10 {
		a.Put(fmt.Sprint(i), &Message{MessageID: fmt.Sprint(i), BodyText: "hi"})
	}
	c.Assert(a.message(&Event{EventID: "0"}), qt.IsNil)
	last := a.message(&Event{EventID: fmt.Sprint(arrivalsMax + 9), InboxID: "desk@x.test"})
	c.Assert(last, qt.IsNotNil)
	c.Assert(last.InboxID, qt.Equals, "desk@x.test")
	c.Assert(a.message(&Event{EventID: fmt.Sprint(10)}), qt.IsNotNil)

	a.Put("big", &Message{BodyText: strings.Repeat("x", arrivalsPerMsgMax)})
	c.Assert(a.message(&Event{EventID: "big"}), qt.IsNil)
	for i := range arrivalsBytes / (128 << 10) * 2 {
		a.Put(fmt.Sprint("half", i), &Message{BodyText: strings.Repeat("x", 128<<10)})
	}
	c.Assert(a.bytes <= arrivalsBytes, qt.IsTrue, qt.Commentf("%d bytes kept", a.bytes))
	c.Assert(a.message(&Event{EventID: fmt.Sprint(arrivalsMax + 9)}), qt.IsNil)
}
