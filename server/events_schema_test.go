package server_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// Every event type's payload, as the stream sends it, is what /openapi.json describes
// (extensions section 1): e.payload validates it against the published schema, whose
// message shapes are closed, so a field the server adds and the schema does not list fails
// here. Each type carries the shape the contract's table gives it.
func TestEveryEventTypeMatchesThePublishedSchema(t *testing.T) {
	e := newControlsEnv(t)
	ctx := context.Background()
	in := e.createInbox("desk")
	e.setFaults(map[string]any{"target": "delivery", "match": map[string]any{"recipient": "*@bounce.test"},
		"effect": map[string]any{"smtpCode": 550, "enhancedCode": "5.1.1", "message": "no such user"}})
	s := e.openStream(e.full, "")

	e.deliver(in, db.NewMessage{MessageID: "<got@far.test>", From: "ann@far.test", To: []string{in}, Cc: []string{"cat@far.test"},
		Subject: "hello", Text: "hello", HTML: "<p>hello</p>", Triage: complete("personal", ptr(true), ptr("high"))})
	e.deliver(in, db.NewMessage{MessageID: "<held@far.test>", From: "c@far.test", To: []string{in}, Subject: "prize", Text: "click",
		Protection: &db.Protection{Status: db.ProtectionQuarantined, ScannedAt: "2026-11-01T00:00:00.000Z",
			Authentication: db.Authentication{SPF: "fail", DKIM: "none", DMARC: "fail", SigningDomains: []string{}},
			Spam:           db.Spam{Score: 9, Threshold: 6}, Antivirus: db.Antivirus{Status: "clean", Signatures: []string{}}, Reasons: []string{"spam"}}})
	held, _, err := e.store.ListQuarantined(ctx, db.QuarantineFilter{Inbox: in})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, held, qt.HasLen, 1)
	released, err := db.ReleaseMessage(ctx, e.store, held[0].UUID, db.Actor{Name: "admin"})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, released, qt.IsTrue)
	e.ok("updateMessageLabels", "PATCH", msgPath(in, "<got@far.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, map[string]any{"to": []string{"ann@bounce.test"},
		"subject": "s", "text": "t", "idempotencyKey": "k1"})

	got := map[string]map[string]any{} // the first payload of each type
	for len(got) < len(db.EventTypes()) {
		ev := s.next()
		if got[ev.typ] == nil {
			got[ev.typ] = e.payload(ev)
		}
	}
	c := qt.New(t)
	message := func(typ string) map[string]any { return got[typ]["message"].(map[string]any) }
	for _, typ := range []string{db.EventReceived, db.EventReleased} {
		m := message(typ)
		c.Check(m["text"], qt.Not(qt.IsNil), qt.Commentf("%s", typ))
		c.Check(m["html"], qt.IsNil, qt.Commentf("%s", typ))
		c.Check(m["bodyTruncated"], qt.Equals, false, qt.Commentf("%s", typ))
		c.Check(m["bodiesOmitted"], qt.Equals, false, qt.Commentf("%s", typ))
	}
	for _, typ := range []string{db.EventQuarantined, db.EventBounced} {
		c.Check(message(typ)["subject"], qt.Not(qt.IsNil), qt.Commentf("%s: a summary", typ))
		c.Check(message(typ)["text"], qt.IsNil, qt.Commentf("%s: no text", typ))
	}
	c.Check(got[db.EventBounced]["recipients"], qt.DeepEquals, []any{"ann@bounce.test"})
	c.Check(keys(message(db.EventDeliveryUpdated)), qt.DeepEquals, []string{"inboxId", "messageId", "threadId"})
	c.Check(got[db.EventDeliveryUpdated]["delivery"], qt.Not(qt.IsNil))
	c.Check(keys(message(db.EventLabelsUpdated)), qt.DeepEquals, []string{"inboxId", "labels", "messageId", "threadId"})
}

func keys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }
