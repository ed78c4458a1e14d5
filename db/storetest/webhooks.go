package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// hook creates a webhook of acme to a loopback URL with the given filters.
func (e *env) hook(types []string, inboxes ...string) *db.Webhook {
	e.Helper()
	w, err := db.CreateWebhook(e.ctx, e.st, db.NewWebhook{AccountID: "acme", URL: "http://127.0.0.1:9/hook", EventTypes: types, InboxIDs: inboxes})
	e.Assert(err, qt.IsNil)
	return w
}

// deliveries lists every delivery of a webhook, newest first.
func (e *env) deliveries(w *db.Webhook) []db.HookDelivery {
	e.Helper()
	ds, _, err := e.st.ListHookDeliveries(e.ctx, "acme", w.WebhookID, 100, "")
	e.Assert(err, qt.IsNil)
	return ds
}

// claimHooks claims what is due, four per webhook.
func (e *env) claimHooks(busy map[int64]int) []db.HookJob {
	e.Helper()
	jobs, err := e.st.ClaimHookDeliveries(e.ctx, db.HookClaim{Limit: 100, PerWebhook: 4, Busy: busy, Lease: time.Minute})
	e.Assert(err, qt.IsNil)
	return jobs
}

// finish records one attempt.
func (e *env) finish(j db.HookJob, o db.HookOutcome) (bool, error) {
	kept, err := e.st.FinishHookDeliveries(e.ctx, []db.HookAttempt{{Job: j, Outcome: o}})
	if err != nil {
		return false, err
	}
	return kept[0], nil
}

// taker is a db.HookTaker with room for a number of deliveries in all, recording what it
// is told.
type taker struct {
	mu       sync.Mutex
	room     int
	reserved int
	took     []db.HookJob
	canceled int
}

func (t *taker) Reserve(int64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved+len(t.took) >= t.room { // what it took stays held
		return 0, false
	}
	t.reserved++
	return time.Minute, true
}

func (t *taker) Take(jobs []db.HookJob) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reserved -= len(jobs)
	t.took = append(t.took, jobs...)
}

func (t *taker) Missed() {}

func (t *taker) Cancel(rows []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reserved -= len(rows)
	t.canceled += len(rows)
}

func webhookTests() []test {
	return []test{
		{"deliveries offered as they are queued are leased to the taker and handed over once committed, as a claim gives them", func(e *env) {
			t := &taker{room: 2}
			stop, ok := e.st.OfferHookDeliveries(t)
			defer stop()
			if !ok {
				return // the store offers nothing: every delivery is claimed (the tests below)
			}
			w := e.hook(nil)
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(e.inbox, "<b@far.test>"), e.mail(e.inbox, "<c@far.test>"))
			e.Assert(t.took, qt.HasLen, 2)
			e.Assert(t.reserved, qt.Equals, 0)
			evs, err := e.st.Events(e.ctx, 0, db.EventFilter{AccountID: "acme"}, 10)
			e.Assert(err, qt.IsNil)
			e.Assert(evs, qt.HasLen, 3)
			for i, j := range t.took {
				e.Assert(j.Event, qt.DeepEquals, evs[i], qt.Commentf("the event as the log reads it"))
				e.Assert(j.Webhook.WebhookID, qt.Equals, w.WebhookID)
				e.Assert(j.Webhook.Secret, qt.Equals, w.Secret)
				e.Assert(j.Attempt, qt.Equals, 0)
				e.Assert(j.LeaseEnds.After(e.clock().Add(50*time.Second)), qt.IsTrue)
			}
			// The third had no room: it is queued unleased, and claimed; the two handed over
			// are leased and not claimed.
			claimed := e.claimHooks(nil)
			e.Assert(claimed, qt.HasLen, 1)
			e.Assert(claimed[0].Event, qt.DeepEquals, evs[2])
			kept, err := e.finish(t.took[0], db.HookOutcome{At: e.clock(), Status: db.HookDelivered, ResponseStatus: 204})
			e.Assert(err, qt.IsNil)
			e.Assert(kept, qt.IsTrue)
			_, err = e.finish(t.took[1], db.HookOutcome{At: e.clock(), Status: db.HookDelivered, ResponseStatus: 204})
			e.Assert(err, qt.IsNil)
			statuses := map[string]string{}
			for _, d := range e.deliveries(w) {
				statuses[d.EventID] = d.Status
			}
			e.Assert(statuses, qt.DeepEquals, map[string]string{evs[0].EventID: db.HookDelivered, evs[1].EventID: db.HookDelivered,
				evs[2].EventID: db.HookPending})

			// A unit of work that fails after queueing hands nothing over and gives its room back.
			t.took = nil
			failed := errors.New("the unit fails after storing")
			m := e.mail(e.inbox, "<d@far.test>")
			err = e.st.Update(e.ctx, func(tx db.Tx) error {
				if _, err := db.StoreMessage(tx, e.st.Prepare(&m)); err != nil {
					return err
				}
				return failed
			})
			e.Assert(err, qt.ErrorIs, failed)
			e.Assert(t.took, qt.HasLen, 0)
			e.Assert(t.reserved, qt.Equals, 0)
			e.Assert(t.canceled >= 1, qt.IsTrue)
			stop()
			e.receive(e.mail(e.inbox, "<e@far.test>")) // no taker: claimed
			e.Assert(t.took, qt.HasLen, 0)
			e.Assert(e.claimHooks(map[int64]int{}), qt.HasLen, 1)
		}},
		{"a webhook is created enabled, with a secret, and read back", func(e *env) {
			w := e.hook(nil)
			e.Assert(w.Enabled, qt.IsTrue)
			e.Assert(strings.HasPrefix(w.Secret, db.WebhookSecretPrefix), qt.IsTrue)
			key, err := db.WebhookKey(w.Secret)
			e.Assert(err, qt.IsNil)
			e.Assert(key, qt.HasLen, 24)
			got, err := e.st.GetWebhook(e.ctx, "acme", w.WebhookID)
			e.Assert(err, qt.IsNil)
			e.Assert(got, qt.DeepEquals, w)
			_, err = e.st.GetWebhook(e.ctx, "bee", w.WebhookID)
			e.isCode(err, db.ECodeNotFound)
		}},
		{"the rules of create: URL, inboxes, types, the limit", func(e *env) {
			e.account("bee", db.PlanExempt)
			foreign := e.newInbox("bee", "b@x.test")
			for _, n := range []db.NewWebhook{
				{URL: "http://example.com/h"}, {URL: "ftp://example.com/h"}, {URL: "https://u:p@example.com/h"},
				{URL: "https://example.com/h#frag"}, {URL: "/relative"}, {URL: "https://example.com/" + strings.Repeat("a", 2048)},
				{URL: "https://example.com/h", InboxIDs: []string{foreign.InboxID}},
				{URL: "https://example.com/h", EventTypes: []string{"email.nope"}},
				{URL: "https://example.com/h", Secret: "whsec_short"},
			} {
				n.AccountID = "acme"
				_, err := db.CreateWebhook(e.ctx, e.st, n)
				e.isCode(err, db.ECodeInvalidArgument)
			}
			for _, ok := range []string{"http://localhost:8080/h", "http://127.0.0.2/h", "http://[::1]:9/h", "https://example.com/h?q=1"} {
				_, err := db.CreateWebhook(e.ctx, e.st, db.NewWebhook{AccountID: "acme", URL: ok})
				e.Assert(err, qt.IsNil, qt.Commentf("%s", ok))
			}
			_, err := db.CreateWebhook(e.ctx, e.st, db.NewWebhook{AccountID: "acme", URL: "http://10.0.0.1/h", AllowHTTP: true})
			e.Assert(err, qt.IsNil)
			for i := 5; i < db.MaxWebhooks; i++ {
				e.hook(nil)
			}
			_, err = db.CreateWebhook(e.ctx, e.st, db.NewWebhook{AccountID: "acme", URL: "https://example.com/h"})
			e.isCode(err, db.ECodeWebhookLimit)
			list, next, err := e.st.ListWebhooks(e.ctx, "acme", 15, "")
			e.Assert(err, qt.IsNil)
			e.Assert(list, qt.HasLen, 15)
			rest, last, err := e.st.ListWebhooks(e.ctx, "acme", 15, next)
			e.Assert(err, qt.IsNil)
			e.Assert(rest, qt.HasLen, 5)
			e.Assert(last, qt.Equals, "")
			e.Assert(list[0].URL, qt.Equals, "http://127.0.0.1:9/hook") // newest first
		}},
		{"an event is queued for each enabled webhook that wants it", func(e *env) {
			second := e.newInbox("acme", "two@x.test")
			all, received, onlySecond, labels := e.hook(nil), e.hook([]string{db.EventReceived}), e.hook(nil, second.InboxID),
				e.hook([]string{db.EventLabelsUpdated})
			off := e.hook(nil)
			disabled := false
			_, err := db.UpdateWebhook(e.ctx, e.st, "acme", off.WebhookID, db.WebhookUpdate{Enabled: &disabled})
			e.Assert(err, qt.IsNil)
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(second, "<b@far.test>"))
			e.Assert(e.deliveries(all), qt.HasLen, 2)
			e.Assert(e.deliveries(received), qt.HasLen, 2)
			e.Assert(e.deliveries(onlySecond), qt.HasLen, 1)
			e.Assert(e.deliveries(labels), qt.HasLen, 0)
			e.Assert(e.deliveries(off), qt.HasLen, 0)
			d := e.deliveries(all)[0]
			e.Assert(d.Status, qt.Equals, db.HookPending)
			e.Assert(d.Type, qt.Equals, db.EventReceived)
			e.Assert(d.Attempt, qt.Equals, 0)
			e.Assert(d.NextAttemptAt, qt.IsNotNil)
		}},
		{"a webhook created after an event does not get it", func(e *env) {
			e.receive(e.mail(e.inbox, "<a@far.test>"))
			w := e.hook(nil)
			e.Assert(e.deliveries(w), qt.HasLen, 0)
			e.Assert(e.claimHooks(nil), qt.HasLen, 0)
		}},
		{"the fan-out follows each change of the account's webhooks from the next event on", func(e *env) {
			e.receive(e.mail(e.inbox, "<a@far.test>")) // the account had none
			w := e.hook(nil)
			e.receive(e.mail(e.inbox, "<b@far.test>"))
			e.Assert(e.deliveries(w), qt.HasLen, 1)
			labelsOnly, every, off, on := []string{db.EventLabelsUpdated}, []string{}, false, true
			for _, step := range []struct {
				u    db.WebhookUpdate
				want int
			}{{db.WebhookUpdate{EventTypes: &labelsOnly}, 1}, {db.WebhookUpdate{EventTypes: &every}, 2},
				{db.WebhookUpdate{Enabled: &off}, 2}, {db.WebhookUpdate{Enabled: &on}, 3}} {
				_, err := db.UpdateWebhook(e.ctx, e.st, "acme", w.WebhookID, step.u)
				e.Assert(err, qt.IsNil)
				e.receive(e.mail(e.inbox, fmt.Sprintf("<after-%d@far.test>", step.want)))
				e.Assert(e.deliveries(w), qt.HasLen, step.want)
			}
			// A webhook whose unit of work fails is not there for the next event, even one its
			// unit saw.
			failed := errors.New("the unit fails after inserting")
			err := e.st.Update(e.ctx, func(tx db.Tx) error {
				now := db.Time{Time: tx.Now()}
				_, err := tx.InsertWebhook(&db.Webhook{AccountID: "acme", WebhookID: "00000000-0000-4000-8000-000000000001",
					URL: "http://127.0.0.1:9/x", EventTypes: []string{}, InboxIDs: []string{}, InboxRows: []int64{}, Enabled: true,
					Secret: db.NewWebhookSecret(), CreatedAt: now, UpdatedAt: now})
				e.Assert(err, qt.IsNil)
				hooks, err := tx.EnabledWebhooks("acme") // as an event's fan-out after it would
				e.Assert(err, qt.IsNil)
				e.Assert(hooks, qt.HasLen, 2)
				return failed
			})
			e.Assert(err, qt.ErrorIs, failed)
			e.receive(e.mail(e.inbox, "<g@far.test>"))
			backlog, err := e.st.HookBacklog(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(backlog, qt.Equals, int64(4), qt.Commentf("only w's deliveries"))
			e.Assert(db.DeleteWebhook(e.ctx, e.st, "acme", w.WebhookID), qt.IsNil)
			e.receive(e.mail(e.inbox, "<h@far.test>"))
			backlog, err = e.st.HookBacklog(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(backlog, qt.Equals, int64(0))
		}},
		{"a webhook created while mail arrives gets exactly the events committed after it", func(e *env) {
			var wg sync.WaitGroup
			errs := make(chan error, 41)
			var w *db.Webhook
			for i := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == 20 {
						var err error
						w, err = db.CreateWebhook(e.ctx, e.st, db.NewWebhook{AccountID: "acme", URL: "http://127.0.0.1:9/hook"})
						errs <- err
					}
					_, err := db.Deliver(e.ctx, e.st, []db.NewMessage{e.mail(e.inbox, fmt.Sprintf("<c%d@far.test>", i))})
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				e.Assert(err, qt.IsNil)
			}
			got := map[string]bool{}
			for _, d := range e.deliveries(w) {
				got[d.EventID] = true
			}
			evs := e.events(0, acme())
			e.Assert(evs, qt.HasLen, 40)
			first := len(evs) // the first event delivered: every one after it is too
			for i := len(evs) - 1; i >= 0 && got[evs[i].EventID]; i-- {
				first = i
			}
			e.Assert(len(got), qt.Equals, len(evs)-first, qt.Commentf("the deliveries are the events after the webhook's commit"))
		}},
		{"a claim leases due deliveries, at most the free slots of each webhook", func(e *env) {
			a, b := e.hook(nil), e.hook(nil)
			for i := 0; i < 6; i++ {
				e.receive(e.mail(e.inbox, "<m"+string(rune('a'+i))+"@far.test>"))
			}
			jobs := e.claimHooks(map[int64]int{a.Row: 3})
			perHook := map[int64]int{}
			for _, j := range jobs {
				perHook[j.Webhook.Row]++
				e.Assert(j.Event.Type, qt.Equals, db.EventReceived)
				e.Assert(j.Event.InboxID, qt.Equals, e.inbox.InboxID)
				e.Assert(j.Webhook.Secret, qt.Not(qt.Equals), "")
			}
			e.Assert(perHook, qt.DeepEquals, map[int64]int{a.Row: 1, b.Row: 4})
			e.Assert(len(e.claimHooks(nil)), qt.Equals, 4+2, qt.Commentf("leased rows are not claimed twice"))
			backlog, err := e.st.HookBacklog(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(backlog, qt.Equals, int64(12))
		}},
		{"an attempt is recorded by its lease; a lost lease is claimed again", func(e *env) {
			w := e.hook(nil)
			e.receive(e.mail(e.inbox, "<a@far.test>"))
			first := e.claimHooks(nil)
			e.Assert(first, qt.HasLen, 1)
			e.Assert(e.st.ReleaseHookDelivery(e.ctx, first[0]), qt.IsNil) // given back unattempted: claimable at once
			first = e.claimHooks(nil)
			e.Assert(first, qt.HasLen, 1)
			e.Assert(first[0].Attempt, qt.Equals, 0)
			e.advance(2 * time.Minute) // the lease ends: another worker takes the row
			second := e.claimHooks(nil)
			e.Assert(second, qt.HasLen, 1)
			ok, err := e.finish(first[0], db.HookOutcome{At: e.clock(), Status: db.HookDelivered, ResponseStatus: 200})
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsFalse)
			next := e.clock().Add(5 * time.Second)
			ok, err = e.finish(second[0], db.HookOutcome{At: e.clock(), Status: db.HookPending, ResponseStatus: 500,
				Error: "HTTP 500", Next: next})
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsTrue)
			d := e.deliveries(w)[0]
			e.Assert(d.Attempt, qt.Equals, 1)
			e.Assert(*d.ResponseStatus, qt.Equals, 500)
			e.Assert(d.NextAttemptAt.Equal(next.Truncate(time.Millisecond)), qt.IsTrue)
			e.Assert(e.claimHooks(nil), qt.HasLen, 0) // not due yet
			due, ok, err := e.st.NextHookDue(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsTrue)
			e.Assert(due.Equal(next.Truncate(time.Millisecond)), qt.IsTrue)
			e.advance(5 * time.Second)
			third := e.claimHooks(nil)
			e.Assert(third, qt.HasLen, 1)
			e.Assert(third[0].Attempt, qt.Equals, 1)
			ok, err = e.finish(third[0], db.HookOutcome{At: e.clock(), Status: db.HookDelivered, ResponseStatus: 204})
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsTrue)
			d = e.deliveries(w)[0]
			e.Assert(d.Status, qt.Equals, db.HookDelivered)
			e.Assert(d.DeliveredAt, qt.IsNotNil)
			e.Assert(d.NextAttemptAt, qt.IsNil)
			_, ok, err = e.st.NextHookDue(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(ok, qt.IsFalse)
		}},
		{"a disabled webhook's pending deliveries wait; deleting it drops them", func(e *env) {
			w := e.hook(nil)
			e.receive(e.mail(e.inbox, "<a@far.test>"))
			off, on := false, true
			_, err := db.UpdateWebhook(e.ctx, e.st, "acme", w.WebhookID, db.WebhookUpdate{Enabled: &off})
			e.Assert(err, qt.IsNil)
			e.Assert(e.claimHooks(nil), qt.HasLen, 0)
			e.receive(e.mail(e.inbox, "<b@far.test>"))
			_, err = db.UpdateWebhook(e.ctx, e.st, "acme", w.WebhookID, db.WebhookUpdate{Enabled: &on})
			e.Assert(err, qt.IsNil)
			e.Assert(e.claimHooks(nil), qt.HasLen, 1)
			e.Assert(db.DeleteWebhook(e.ctx, e.st, "acme", w.WebhookID), qt.IsNil)
			backlog, err := e.st.HookBacklog(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(backlog, qt.Equals, int64(0))
			_, _, err = e.st.ListHookDeliveries(e.ctx, "acme", w.WebhookID, 10, "")
			e.isCode(err, db.ECodeNotFound)
			e.isCode(db.DeleteWebhook(e.ctx, e.st, "acme", w.WebhookID), db.ECodeNotFound)
		}},
		{"an update changes what it names and keeps the rest", func(e *env) {
			w := e.hook([]string{db.EventReceived})
			e.advance(time.Second)
			url, desc := "https://example.com/new", "new one"
			got, err := db.UpdateWebhook(e.ctx, e.st, "acme", w.WebhookID, db.WebhookUpdate{URL: &url, Description: &desc})
			e.Assert(err, qt.IsNil)
			e.Assert(got.URL, qt.Equals, url)
			e.Assert(got.EventTypes, qt.DeepEquals, []string{db.EventReceived})
			e.Assert(got.Secret, qt.Equals, w.Secret)
			e.Assert(got.UpdatedAt.After(w.UpdatedAt.Time), qt.IsTrue)
			bad := "http://example.com/h"
			_, err = db.UpdateWebhook(e.ctx, e.st, "acme", w.WebhookID, db.WebhookUpdate{URL: &bad})
			e.isCode(err, db.ECodeInvalidArgument)
			_, err = db.UpdateWebhook(e.ctx, e.st, "acme", w.WebhookID, db.WebhookUpdate{})
			e.isCode(err, db.ECodeInvalidArgument)
			_, err = db.UpdateWebhook(e.ctx, e.st, "bee", w.WebhookID, db.WebhookUpdate{Description: &desc})
			e.isCode(err, db.ECodeNotFound)
			stored, err := e.st.GetWebhook(e.ctx, "acme", w.WebhookID)
			e.Assert(err, qt.IsNil)
			e.Assert(stored, qt.DeepEquals, got)
		}},
		{"a fixed secret is kept, and a webhook with it is made once", func(e *env) {
			const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			n := db.NewWebhook{AccountID: "acme", URL: "http://localhost:9/h", Secret: secret}
			first, err := db.CreateWebhook(e.ctx, e.st, n)
			e.Assert(err, qt.IsNil)
			e.Assert(first.Secret, qt.Equals, secret)
			again, err := db.CreateWebhook(e.ctx, e.st, n)
			e.Assert(err, qt.IsNil)
			e.Assert(again.WebhookID, qt.Equals, first.WebhookID)
			list, _, err := e.st.ListWebhooks(e.ctx, "acme", 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(list, qt.HasLen, 1)
		}},
		{"deliveries go with their events: a deleted inbox, retention", func(e *env) {
			w := e.hook(nil)
			gone := e.newInbox("acme", "gone@x.test")
			e.receive(e.mail(gone, "<a@far.test>"), e.mail(e.inbox, "<b@far.test>"))
			e.Assert(e.st.DeleteInbox(e.ctx, gone), qt.IsNil)
			e.Assert(e.deliveries(w), qt.HasLen, 1)
			e.advance(db.EventRetention + time.Hour)
			_, err := e.st.TrimEvents(e.ctx, e.clock().Add(-db.EventRetention))
			e.Assert(err, qt.IsNil)
			e.Assert(e.deliveries(w), qt.HasLen, 0)
		}},
	}
}
