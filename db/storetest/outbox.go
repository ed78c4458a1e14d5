package storetest

import (
	"encoding/json"
	"sync"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

func (e *env) outbox(f db.OutboxFilter) []db.OutboxItem {
	e.Helper()
	if f.Limit == 0 {
		f.Limit = 100
	}
	items, err := e.st.Outbox(e.ctx, f)
	e.Assert(err, qt.IsNil)
	return items
}

func outboxIDs(items []db.OutboxItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.MessageID)
	}
	return out
}

func testDoubleTests() []test {
	return []test{
		{"the outbox holds sent mail with its MIME, newest first, until cleared", func(e *env) {
			second := e.newInbox("acme", "two@x.test")
			e.send(e.inbox, "k1", "a@far.test")
			e.receive(e.mail(e.inbox, "<in@far.test>"))
			e.send(second, "k2", "B@far.test", "c@far.test")
			items := e.outbox(db.OutboxFilter{})
			e.Assert(outboxIDs(items), qt.DeepEquals, []string{"<k2@x.test>", "<k1@x.test>"})
			e.Assert(items[0].InboxID, qt.Equals, second.InboxID)
			e.Assert(items[0].To, qt.DeepEquals, []string{"B@far.test", "c@far.test"})
			e.Assert(items[0].Raw, qt.Contains, "Subject: sent k2")
			e.Assert(items[0].Delivery.Recipients, qt.HasLen, 2)
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{InboxRow: e.inbox.ID})), qt.DeepEquals, []string{"<k1@x.test>"})
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{To: "b@FAR.test"})), qt.DeepEquals, []string{"<k2@x.test>"})
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{Limit: 1})), qt.DeepEquals, []string{"<k2@x.test>"})

			e.Assert(e.st.ClearOutbox(e.ctx), qt.IsNil)
			e.Assert(e.outbox(db.OutboxFilter{}), qt.HasLen, 0)
			e.send(e.inbox, "k3", "a@far.test")
			e.Assert(outboxIDs(e.outbox(db.OutboxFilter{})), qt.DeepEquals, []string{"<k3@x.test>"})
			e.message(e.inbox, "<k1@x.test>") // still in its inbox
		}},
		{"a purge empties one inbox and forgets its idempotency keys", func(e *env) {
			other := e.newInbox("acme", "two@x.test")
			e.receive(e.mail(e.inbox, "<a@far.test>"), e.mail(other, "<b@far.test>"))
			first := e.send(e.inbox, "k1", "a@far.test")
			n, err := e.st.PurgeInbox(e.ctx, e.inbox.ID)
			e.Assert(err, qt.IsNil)
			e.Assert(n, qt.Equals, 2)
			page, _, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{Labels: []string{}}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 0)
			threads, _, err := e.st.ListThreads(e.ctx, e.inbox.ID, db.MessageFilter{}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(threads, qt.HasLen, 0)
			e.message(other, "<b@far.test>")
			again := e.send(e.inbox, "k1", "a@far.test")
			e.Assert(again.Deduplicated, qt.IsFalse)
			e.Assert(again.ThreadID, qt.Not(qt.Equals), first.ThreadID)
		}},
	}
}

func resetTests() []test {
	return []test{
		{"a reset brings back the snapshot's state and nothing else", func(e *env) {
			seeded := e.receive(e.mail(e.inbox, "<seed@far.test>"))[0]
			tok := e.accountKey("acme", db.ScopeInboxesRead)
			e.Assert(e.st.SnapshotForReset(e.ctx), qt.IsNil)
			last, _ := e.bounds()

			// What a test does afterwards.
			e.receive(e.mail(e.inbox, "<later@far.test>"))
			e.send(e.inbox, "k1", "a@far.test")
			extra := e.newInbox("acme", "extra@x.test")
			e.Assert(db.UpdateMessageLabels(e.ctx, e.st, e.inbox.ID, "<seed@far.test>", []string{"vip"}, []string{db.LabelUnread}), qt.IsNil)
			_, err := e.st.RevokeKey(e.ctx, db.KeyIDOfToken(tok))
			e.Assert(err, qt.IsNil)
			e.Assert(e.st.SetAccountDisabled(e.ctx, "acme", true), qt.IsNil)

			e.Assert(e.st.ResetToSnapshot(e.ctx), qt.IsNil)
			page, _, err := e.st.ListMessages(e.ctx, e.inbox.ID, db.MessageFilter{Labels: []string{}}, 10, "")
			e.Assert(err, qt.IsNil)
			e.Assert(page, qt.HasLen, 1)
			e.Assert(page[0].MessageID, qt.Equals, "<seed@far.test>")
			e.Assert(page[0].Labels, qt.DeepEquals, []string{db.LabelReceived, db.LabelUnread})
			e.Assert(e.works(tok), qt.IsTrue)
			_, err = e.st.InboxByAddress(e.ctx, "acme", extra.Address)
			e.isCode(err, db.ECodeNotFound)
			again := e.send(e.inbox, "k1", "a@far.test") // the idempotency key is free again
			e.Assert(again.Deduplicated, qt.IsFalse)
			e.Assert(e.outbox(db.OutboxFilter{}), qt.HasLen, 1)

			evs := e.events(0, acme())
			e.Assert(typesOf(evs), qt.DeepEquals, []string{db.EventReceived, db.EventDeliveryUpdated}) // the seed's, and the send since
			changes := e.changes(last)
			queued := map[int64]bool{}
			for _, c := range changes {
				queued[c.Message] = true
			}
			e.Assert(queued[seeded.RowID], qt.IsTrue) // the index reads the seed message again
			e.Assert(len(queued) >= 3, qt.IsTrue, qt.Commentf("%v", changes))
		}},
		{"a reset keeps the snapshot's events again, whatever retention dropped since", func(e *env) {
			// A test moves the clock past retention (the test controls trim then), and the
			// reset after it brings back the start's events: a stream resumes from before
			// them, as it could right after start-up.
			e.receive(e.mail(e.inbox, "<seed@far.test>"))
			e.Assert(e.st.SnapshotForReset(e.ctx), qt.IsNil)
			e.advance(db.EventRetention + time.Hour)
			_, err := e.st.TrimEvents(e.ctx, e.clock().Add(-db.EventRetention))
			e.Assert(err, qt.IsNil)
			e.Assert(e.st.ResetToSnapshot(e.ctx), qt.IsNil)
			evs := e.events(0, acme())
			e.Assert(typesOf(evs), qt.DeepEquals, []string{db.EventReceived})
			_, expired, err := e.st.EventBounds(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(expired < evs[0].Seq, qt.IsTrue, qt.Commentf("expired through %d, the seed's event is %d", expired, evs[0].Seq))
		}},
		{"a reset without a snapshot is not found", func(e *env) {
			e.isCode(e.st.ResetToSnapshot(e.ctx), db.ECodeNotFound)
		}},
	}
}

// controls changes the test controls' state with fn and returns it as it is after.
func (e *env) controls(fn func(*db.ControlState) bool) *db.ControlState {
	e.Helper()
	c, err := e.st.UpdateControls(e.ctx, fn)
	e.Assert(err, qt.IsNil)
	return c
}

func controlTests() []test {
	return []test{
		{"the controls' rules, firings and clock offset are kept and read back", func(e *env) {
			c, err := e.st.Controls(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(c, qt.DeepEquals, &db.ControlState{}) // a new database has none
			changed := e.st.ControlsChanged()
			rules := []json.RawMessage{json.RawMessage(`{"target":"api"}`), json.RawMessage(`{"target":"smtp"}`)}
			set := e.controls(func(c *db.ControlState) bool { c.SetRules(rules); return true })
			<-changed // fired by the commit
			e.Assert(set.Rules, qt.HasLen, 2)
			e.Assert(set.Fired, qt.DeepEquals, []int{0, 0})
			e.controls(func(c *db.ControlState) bool { c.AdvanceClock(time.Hour); return true })
			got, err := e.st.Controls(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(string(got.Rules[1]), qt.Equals, `{"target":"smtp"}`)
			e.Assert(got.ClockOffset, qt.Equals, time.Hour)
			e.Assert(got.Version > set.Version, qt.IsTrue)
		}},
		{"a rule with times fires that many times in all, and not for rules set since", func(e *env) {
			set := e.controls(func(c *db.ControlState) bool { c.SetRules([]json.RawMessage{json.RawMessage(`{}`)}); return true })
			var wg sync.WaitGroup
			var mu sync.Mutex
			spent := 0
			for range 8 { // at once, as several processes would
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok := false
					_, err := e.st.UpdateControls(e.ctx, func(c *db.ControlState) bool { ok = c.SpendFault(set.RulesSet, 0, 3); return ok })
					e.Check(err, qt.IsNil)
					mu.Lock()
					defer mu.Unlock()
					if ok {
						spent++
					}
				}()
			}
			wg.Wait()
			e.Assert(spent, qt.Equals, 3)
			after := e.controls(func(c *db.ControlState) bool { return false }) // nothing changes
			e.Assert(after.Fired, qt.DeepEquals, []int{3})

			e.controls(func(c *db.ControlState) bool { c.SetRules([]json.RawMessage{json.RawMessage(`{}`)}); return true })
			stale := true
			e.controls(func(c *db.ControlState) bool { stale = c.SpendFault(set.RulesSet, 0, 5); return stale })
			e.Assert(stale, qt.IsFalse) // the old rules' firing does not spend the new rule
		}},
		{"clearing takes the rules and the offset away, and a reset leaves the controls alone", func(e *env) {
			e.Assert(e.st.SnapshotForReset(e.ctx), qt.IsNil)
			e.controls(func(c *db.ControlState) bool {
				c.SetRules([]json.RawMessage{json.RawMessage(`{}`)})
				c.AdvanceClock(time.Minute)
				return true
			})
			e.Assert(e.st.ResetToSnapshot(e.ctx), qt.IsNil)
			kept, err := e.st.Controls(e.ctx)
			e.Assert(err, qt.IsNil)
			e.Assert(kept.ClockOffset, qt.Equals, time.Minute) // the server clears them itself
			cleared := e.controls(func(c *db.ControlState) bool { c.Clear(); return true })
			e.Assert(cleared.Rules, qt.HasLen, 0)
			e.Assert(cleared.ClockOffset, qt.Equals, time.Duration(0))
		}},
	}
}
