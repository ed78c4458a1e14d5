package storetest

import (
	"encoding/json"
	"errors"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// events returns every event of the log after seq that passes f.
func (e *env) events(after int64, f db.EventFilter) []db.Event {
	e.Helper()
	evs, err := e.st.Events(e.ctx, after, f, 1000)
	e.Assert(err, qt.IsNil)
	return evs
}

// acme is the filter of every event of the suite's account.
func acme() db.EventFilter { return db.EventFilter{AccountID: "acme"} }

func typesOf(evs []db.Event) []string {
	out := []string{}
	for _, ev := range evs {
		out = append(out, ev.Type)
	}
	return out
}

func eventTests() []test {
	return []test{
		{"received and held mail append their events, in commit order", func(e *env) {
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.held(e.inbox, "<h@far.test>", cleanScan()))
			evs := e.events(0, acme())
			e.Assert(typesOf(evs), qt.DeepEquals, []string{db.EventReceived, db.EventQuarantined})
			e.Assert(evs[0].Seq < evs[1].Seq, qt.IsTrue)
			e.Assert(evs[0].EventID, qt.Not(qt.Equals), "")
			e.Assert(evs[0].EventID, qt.Not(qt.Equals), evs[1].EventID)
			e.Assert(evs[0].InboxID, qt.Equals, e.inbox.InboxID)
			e.Assert(evs[0].InboxRow, qt.Equals, e.inbox.ID)
			e.Assert(evs[0].MessageID, qt.Equals, "<a@far.test>")
			e.Assert(evs[0].ThreadID, qt.Equals, e.message(e.inbox, "<a@far.test>").ThreadID)
			e.Assert(evs[0].OccurredAt.Equal(start()), qt.IsTrue, qt.Commentf("%v", evs[0].OccurredAt))
			e.Assert(e.events(evs[0].Seq, acme()), qt.HasLen, 1)
		}},
		{"a unit of work that fails leaves no event", func(e *env) {
			row := e.receive(e.mail(e.inbox, "<a@far.test>"))[0].RowID
			last := e.events(0, acme())[0].Seq
			err := e.st.Update(e.ctx, func(tx db.Tx) error {
				if err := db.RecordEvent(tx, db.NewEvent{Type: db.EventReleased, MessageRow: row}); err != nil {
					return err
				}
				return errors.New("changed its mind")
			})
			e.Assert(err, qt.ErrorMatches, "changed its mind")
			e.Assert(e.events(last, acme()), qt.HasLen, 0)
		}},
		{"a send, its delivery updates and its bounces are events", func(e *env) {
			e.send(e.inbox, "k1", "gone@far.test")
			jobs, err := e.st.ClaimOutbound(e.ctx, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(e.st.FinishOutbound(e.ctx, jobs[0], db.OutboundOutcome{Suppress: true,
				Update: db.RecipientDelivery{Status: db.RecipientBounced, SMTPStatusCode: "550", Reason: "no such user"}}), qt.IsNil)
			e.send(e.inbox, "k2", "gone@far.test", "ok@far.test")
			evs := e.events(0, acme())
			e.Assert(typesOf(evs), qt.DeepEquals, []string{db.EventDeliveryUpdated, db.EventDeliveryUpdated, db.EventBounced,
				db.EventDeliveryUpdated, db.EventBounced})
			e.Assert(evs[0].Delivery.Version, qt.Equals, 1)
			e.Assert(evs[0].Delivery.Recipients[0].Status, qt.Equals, db.RecipientQueued)
			e.Assert(evs[1].Delivery.Version, qt.Equals, 2)
			e.Assert(evs[1].Delivery.Recipients[0].Status, qt.Equals, db.RecipientBounced)
			e.Assert(evs[2].Recipients, qt.DeepEquals, []string{"gone@far.test"})
			e.Assert(evs[3].MessageID, qt.Equals, "<k2@x.test>")
			e.Assert(evs[4].Recipients, qt.DeepEquals, []string{"gone@far.test"})
		}},
		{"a label change is an event per message it changes, with the labels after it", func(e *env) {
			e.receive(e.mail(e.inbox, "<a@far.test>"))
			last := e.events(0, acme())[0].Seq
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<a@far.test>", []string{"vip"}, []string{db.LabelUnread}), qt.IsNil)
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<a@far.test>", []string{"vip"}, nil), qt.IsNil)
			evs := e.events(last, acme())
			e.Assert(typesOf(evs), qt.DeepEquals, []string{db.EventLabelsUpdated})
			e.Assert(evs[0].Labels, qt.DeepEquals, []string{db.LabelReceived, "vip"})
		}},
		{"a release from quarantine is an event", func(e *env) {
			e.receive(e.held(e.inbox, "<h@far.test>", cleanScan()))
			_, err := db.ReleaseMessage(e.ctx, e.st, e.reviewID("<h@far.test>"), operator())
			e.Assert(err, qt.IsNil)
			e.Assert(typesOf(e.events(0, acme())), qt.DeepEquals, []string{db.EventQuarantined, db.EventReleased})
		}},
		{"a filter chooses the account, inboxes and types", func(e *env) {
			e.account("bee", db.PlanExempt)
			other := e.newInbox("bee", "b@x.test")
			second := e.newInbox("acme", "two@x.test")
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(other, "<b@far.test>"), e.mail(second, "<c@far.test>"))
			e.send(second, "k1", "a@far.test")
			e.Assert(e.events(0, acme()), qt.HasLen, 3)
			e.Assert(e.events(0, db.EventFilter{AccountID: "bee"}), qt.HasLen, 1)
			only := e.events(0, db.EventFilter{AccountID: "acme", Inboxes: []int64{second.ID}, Types: []string{db.EventReceived}})
			e.Assert(only, qt.HasLen, 1)
			e.Assert(only[0].MessageID, qt.Equals, "<c@far.test>")
		}},
		{"a commit with events wakes the readers", func(e *env) {
			woken := e.st.EventsCommitted()
			select {
			case <-woken:
				e.Fatalf("woken before any event")
			default:
			}
			e.receive(e.mail(e.inbox, "<a@far.test>"))
			select {
			case <-woken:
			case <-time.After(5 * time.Second):
				e.Fatalf("not woken by a committed event")
			}
		}},
		{"retention drops old events and says how far", func(e *env) {
			e.receive(e.mail(e.inbox, "<old@far.test>"))
			e.advance(db.EventRetention + time.Hour)
			e.receive(e.mail(e.inbox, "<new@far.test>"))
			first := e.events(0, acme())[0].Seq
			n, err := e.st.TrimEvents(e.ctx, e.clock().Add(-db.EventRetention))
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, int64(1))
			last, expired, err := e.st.EventBounds(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(expired, qt.Equals, first)
			e.Assert(last, qt.Equals, first+1)
			evs := e.events(0, acme())
			e.Assert(evs, qt.HasLen, 1)
			e.Assert(evs[0].MessageID, qt.Equals, "<new@far.test>")
		}},
		{"a deleted inbox takes its events along", func(e *env) {
			gone := e.newInbox("acme", "gone@x.test")
			e.receive(e.mail(gone, "<a@far.test>"), e.mail(e.inbox, "<b@far.test>"))
			e.Assert(e.st.DeleteInbox(e.ctx, gone), qt.IsNil)
			evs := e.events(0, acme())
			e.Assert(evs, qt.HasLen, 1)
			e.Assert(evs[0].MessageID, qt.Equals, "<b@far.test>")
		}},
		{"an event's message as this process stored it is what getMessage reads back", func(e *env) {
			yes := true
			rich := e.mail(e.inbox, "<rich@far.test>")
			rich.Cc, rich.ReplyTo, rich.References = []string{"cat@far.test", "bo@far.test"}, []string{"ann@far.test"}, []string{"<x@far.test>"}
			rich.InReplyTo, rich.HTML = "<x@far.test>", "<p>body &amp; more</p>"
			rich.Labels = []string{"vip", "received", "unread", "vip"}
			rich.Protection = &db.Protection{Status: "delivered", ScannedAt: db.Time{Time: e.clock()}.String(),
				Authentication: db.Authentication{SPF: "pass", DKIM: "pass", DMARC: "pass", SigningDomains: []string{"far.test"}},
				Spam:           db.Spam{Score: 0.5, Threshold: 6}, Antivirus: cleanScan(), Reasons: []string{}}
			rich.Triage = &db.Triage{Status: db.TriageComplete, Version: 1,
				Category:   &db.TriageCategory{Value: "personal", Confidence: 0.9, Probabilities: map[string]float64{"personal": 0.9, "other": 0.1}},
				NeedsReply: &db.TriageNeedsReply{Value: &yes, Probability: 0.8}}
			pending := e.queued(e.inbox, "<pending@far.test>")
			pending.Text = "caf\u00e9 \u2014 <b>\u201cquoted\u201d</b>"
			e.receive(rich, pending, e.held(e.inbox, "<h@far.test>", cleanScan()))
			odd := e.mail(e.inbox, "<odd@far.test>") // a timestamp below the millisecond, no labels, no recipients
			odd.Timestamp, odd.Labels, odd.To = e.clock().Add(123456*time.Nanosecond), nil, nil
			_, err := db.Deliver(e.ctx, e.st, []db.NewMessage{odd})
			e.Assert(err, qt.IsNil)

			evs := e.events(0, acme())
			e.Assert(evs, qt.HasLen, 4)
			arrived, err := db.EventMessagesOf(e.ctx, e.st, evs)
			e.Assert(err, qt.IsNil)
			for _, ev := range evs {
				m := arrived[ev.MessageRow]
				e.Assert(m, qt.IsNotNil, qt.Commentf("%s is not at hand", ev.MessageID))
				read := e.message(e.inbox, ev.MessageID)
				e.Assert(jsonOf(e, m.FullView(true, false)), qt.Equals, jsonOf(e, read.FullView(true, false)), qt.Commentf("%s", ev.MessageID))
				e.Assert(jsonOf(e, m.FullView(true, true)), qt.Equals, jsonOf(e, read.FullView(true, true)))
				viaArrival, err := ev.Payload(m)
				e.Assert(err, qt.IsNil)
				viaRead, err := ev.Payload(read)
				e.Assert(err, qt.IsNil)
				e.Assert(string(viaArrival), qt.Equals, string(viaRead))
			}
		}},
		{"an event's message is loaded with its bodies until it is deleted", func(e *env) {
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.held(e.inbox, "<h@far.test>", cleanScan()))
			evs := e.events(0, acme())
			msgs, err := e.st.EventMessages(e.ctx, []int64{evs[0].MessageRow, evs[1].MessageRow})
			e.Assert(err, qt.IsNil)
			e.Assert(msgs[evs[0].MessageRow].BodyText, qt.Equals, "body of <a@far.test>")
			e.Assert(db.DeleteQuarantined(e.ctx, e.st, e.reviewID("<h@far.test>"), operator()), qt.IsNil)
			msgs, err = e.st.EventMessages(e.ctx, []int64{evs[0].MessageRow, evs[1].MessageRow})
			e.Assert(err, qt.IsNil)
			e.Assert(msgs, qt.HasLen, 1)
			e.Assert(e.events(0, acme()), qt.HasLen, 2)
		}},
	}
}

// jsonOf is v as JSON.
func jsonOf(e *env, v any) string {
	e.Helper()
	b, err := json.Marshal(v)
	e.Assert(err, qt.IsNil)
	return string(b)
}
