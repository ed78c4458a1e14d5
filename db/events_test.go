package db

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

func payloadOf(c *qt.C, e Event, m *Message) map[string]any {
	b, err := e.Payload(m)
	c.Assert(err, qt.IsNil)
	var out map[string]any
	c.Assert(json.Unmarshal(b, &out), qt.IsNil)
	return out
}

func TestEventPayloads(t *testing.T) {
	c := qt.New(t)
	at := time.Date(2026, 9, 20, 18, 7, 46, 0, time.UTC)
	ev := Event{EventID: "e1", InboxID: "me@x.test", OccurredAt: at, MessageID: "<a@far.test>", ThreadID: "t1"}
	m := &Message{MessageID: "<a@far.test>", ThreadID: "t1", InboxID: "me@x.test", Direction: Received, Subject: "hi",
		Labels: []string{LabelReceived}, BodyText: "hello", BodyHTML: "<p>hello</p>", Preview: "hello"}

	ev.Type = EventReceived
	raw, err := ev.Payload(m)
	c.Assert(err, qt.IsNil)
	c.Assert(string(raw), qt.Contains, `"messageId":"<a@far.test>"`) // as the API writes it
	p := payloadOf(c, ev, m)
	c.Assert(p["type"], qt.Equals, EventReceived)
	c.Assert(p["eventId"], qt.Equals, "e1")
	c.Assert(p["inboxId"], qt.Equals, "me@x.test")
	c.Assert(p["occurredAt"], qt.Equals, "2026-09-20T18:07:46.000Z")
	msg := p["message"].(map[string]any)
	c.Assert(msg["text"], qt.Equals, "hello")
	c.Assert(msg["bodyTruncated"], qt.Equals, false)
	c.Assert(msg["bodiesOmitted"], qt.Equals, false)
	_, hasHTML := msg["html"]
	c.Assert(hasHTML, qt.IsFalse)

	long := *m
	long.BodyText = strings.Repeat("é", MaxEventText) // two bytes each: the cut falls inside one
	msg = payloadOf(c, ev, &long)["message"].(map[string]any)
	c.Assert(msg["bodyTruncated"], qt.Equals, true)
	c.Assert(len(msg["text"].(string)), qt.Equals, MaxEventText)

	ev.Type = EventQuarantined
	msg = payloadOf(c, ev, m)["message"].(map[string]any)
	_, hasText := msg["text"]
	c.Assert(hasText, qt.IsFalse)
	c.Assert(msg["subject"], qt.Equals, "hi")

	ev.Type, ev.Labels = EventLabelsUpdated, []string{"vip"}
	c.Assert(payloadOf(c, ev, m)["message"], qt.DeepEquals, map[string]any{"messageId": "<a@far.test>", "threadId": "t1",
		"inboxId": "me@x.test", "labels": []any{"vip"}})

	ev.Type, ev.Delivery = EventDeliveryUpdated, &Delivery{Version: 2, Recipients: []RecipientDelivery{}}
	p = payloadOf(c, ev, nil)
	c.Assert(p["message"], qt.DeepEquals, map[string]any{"messageId": "<a@far.test>", "threadId": "t1", "inboxId": "me@x.test"})
	c.Assert(p["delivery"].(map[string]any)["version"], qt.Equals, 2.0)

	ev.Type, ev.Recipients = EventBounced, []string{"gone@far.test"}
	p = payloadOf(c, ev, m)
	c.Assert(p["recipients"], qt.DeepEquals, []any{"gone@far.test"})

	ev.Type = EventReceived
	c.Assert(payloadOf(c, ev, nil)["message"], qt.DeepEquals, map[string]any{"messageId": "<a@far.test>", "threadId": "t1", "inboxId": "me@x.test"})
}
