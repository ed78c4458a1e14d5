package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/postgres"
)

// Threading across processes: a message joins the thread of the latest message its headers
// name that committed before it, as on SQLite's one writer, whichever process stores each.
// The order of commits is the order of their events in the log.

// A reply whose thread is chosen on one process while its original commits on another,
// before the reply commits, still joins the original's thread; or, when the original has to
// wait for the reply, the reply commits first, with a thread of its own (as a reply that
// comes before its original does).
func TestReplyJoinsAnOriginalCommittedWhileItWasStored(t *testing.T) {
	c := newCluster(t, 2)
	ctx := context.Background()
	original := received(c.inbox, "<orig@far.test>")
	reply := received(c.inbox, "<reply@far.test>")
	reply.ThreadCandidates = []string{"<orig@far.test>"}
	originalDone := make(chan error, 1)
	var once sync.Once
	// Once the reply has looked for the threads it names, and before it writes anything,
	// the original is stored on the other process.
	pause := func() {
		once.Do(func() {
			go func() {
				_, err := db.Deliver(ctx, c.stores[0], []db.NewMessage{original})
				originalDone <- err
			}()
			select {
			case err := <-originalDone:
				originalDone <- err // it committed before the reply
			case <-time.After(time.Second): // it waits for the reply
			}
		})
	}
	err := c.stores[1].Update(ctx, func(tx db.Tx) error {
		_, err := db.StoreMessage(pausedThreading{tx, pause}, c.stores[1].Prepare(&reply))
		return err
	})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, <-originalDone, qt.IsNil)
	checkThreadsFollowCommits(t, c, []db.NewMessage{original, reply})
}

// pausedThreading is a unit of work that pauses once it has looked for the threads a
// message names.
type pausedThreading struct {
	db.Tx
	pause func()
}

func (p pausedThreading) ThreadsOf(inboxID int64, ids []string) (map[string]db.ThreadRef, error) {
	found, err := p.Tx.ThreadsOf(inboxID, ids)
	p.pause()
	return found, err
}

// A chain of messages of one thread (each naming all before it), delivered at once through
// two processes, is threaded by what committed before each: a message joins the thread of
// the latest message it names that committed before it, and starts one when none did.
func TestMessagesOfOneThreadArrivingAtOnceOnTwoProcesses(t *testing.T) {
	for round := range 4 {
		c := newCluster(t, 2)
		var chain []db.NewMessage
		var refs []string
		for i := range 8 {
			m := received(c.inbox, fmt.Sprintf("<chain%d-%d@far.test>", round, i))
			m.ThreadCandidates = append([]string(nil), refs...)
			refs = append(refs, m.MessageID)
			chain = append(chain, m)
		}
		errs := c.each(len(chain), func(i int, st *postgres.Store) error {
			_, err := db.Deliver(context.Background(), st, []db.NewMessage{chain[len(chain)-1-i]})
			return err
		})
		for _, err := range errs {
			qt.Assert(t, err, qt.IsNil)
		}
		checkThreadsFollowCommits(t, c, chain)
	}
}

// checkThreadsFollowCommits checks that each of msgs, all stored, is in the thread of the
// latest message it names whose event came before its own, or in a thread of its own when
// none did.
func checkThreadsFollowCommits(t *testing.T, c *cluster, msgs []db.NewMessage) {
	t.Helper()
	ctx := context.Background()
	events, err := c.stores[0].Events(ctx, 0, db.EventFilter{AccountID: "acme"}, 1000)
	qt.Assert(t, err, qt.IsNil)
	seq := map[string]int64{}
	for _, e := range events {
		seq[e.MessageID] = e.Seq
	}
	thread := map[string]string{}
	for _, m := range msgs {
		got, err := c.stores[0].GetMessage(ctx, c.inbox.ID, m.MessageID)
		qt.Assert(t, err, qt.IsNil)
		thread[m.MessageID] = got.ThreadID
		qt.Assert(t, seq[m.MessageID], qt.Not(qt.Equals), int64(0), qt.Commentf("no event of %s", m.MessageID))
	}
	for _, m := range msgs {
		want := ""
		for i := len(m.ThreadCandidates) - 1; i >= 0; i-- {
			if s, ok := seq[m.ThreadCandidates[i]]; ok && s < seq[m.MessageID] {
				want = thread[m.ThreadCandidates[i]]
				break
			}
		}
		if want != "" {
			qt.Check(t, thread[m.MessageID], qt.Equals, want, qt.Commentf("%s committed after the message it names", m.MessageID))
			continue
		}
		for other, th := range thread {
			if seq[other] < seq[m.MessageID] {
				qt.Check(t, th, qt.Not(qt.Equals), thread[m.MessageID], qt.Commentf("%s names nothing committed before it, yet joined %s's thread", m.MessageID, other))
			}
		}
	}
}
