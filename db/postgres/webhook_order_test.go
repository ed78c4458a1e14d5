package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
)

// A webhook created on one process while another is in the middle of a group commit of
// deliveries gets a delivery of every event committed after it was: an event that was not
// in the log when createWebhook answered is fanned out by the new webhook, as on SQLite,
// where the two commits are one after the other. The group reads the account's webhooks
// once, with its first event, and stores the rest by that reading (log.go).
func TestWebhookCreatedDuringAGroupCommitGetsEveryEventAfterIt(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	ingest, other := c.stores[0], c.stores[1]
	paused, created := make(chan struct{}), make(chan struct{})
	var once sync.Once
	deliver := func(i int) error {
		_, err := db.Deliver(ctx, ingest, []db.NewMessage{received(c.inbox, fmt.Sprintf("<g%d@far.test>", i))})
		return err
	}

	release := holdCommitters(ingest)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Add(len(errs))
	go func() { // the group's first unit: it pauses after its event, before the others run
		defer wg.Done()
		errs[0] = ingest.Update(ctx, func(tx db.Tx) error {
			m := received(c.inbox, "<g0@far.test>")
			if _, err := db.StoreMessage(tx, ingest.Prepare(&m)); err != nil {
				return err
			}
			once.Do(func() {
				close(paused)
				select {
				case <-created:
				case <-time.After(time.Second): // the creation waits for the group
				}
			})
			return nil
		})
	}()
	waitQueued(t, ingest, 1)
	for i := 1; i < len(errs); i++ {
		go func() {
			defer wg.Done()
			errs[i] = deliver(i)
		}()
	}
	waitQueued(t, ingest, len(errs))
	release()

	<-paused
	hook, err := db.CreateWebhook(ctx, other, db.NewWebhook{AccountID: "acme", URL: "http://127.0.0.1:9/hook"})
	qt.Assert(t, err, qt.IsNil)
	before, _, err := other.EventBounds(ctx) // every event committed before the webhook
	qt.Assert(t, err, qt.IsNil)
	close(created)
	wg.Wait()
	for _, err := range errs {
		qt.Assert(t, err, qt.IsNil)
	}
	qt.Assert(t, deliver(len(errs)), qt.IsNil) // and one after all

	events, err := other.Events(ctx, 0, db.EventFilter{AccountID: "acme"}, 100)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, events, qt.HasLen, len(errs)+1)
	ds, _, err := other.ListHookDeliveries(ctx, "acme", hook.WebhookID, 100, "")
	qt.Assert(t, err, qt.IsNil)
	delivered := map[string]bool{}
	for _, d := range ds {
		delivered[d.EventID] = true
	}
	for _, e := range events {
		qt.Check(t, delivered[e.EventID], qt.Equals, e.Seq > before,
			qt.Commentf("event %d of %s (webhook created after event %d)", e.Seq, e.MessageID, before))
	}
}
