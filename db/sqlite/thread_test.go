package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/inboxd/inboxd/db"

	qt "github.com/frankban/quicktest"
)

// The thread aggregates a reply adds incrementally (appendToThread) are the ones a full
// recomputation (refreshThread) gives, in order and out of order.
func TestThreadAggregatesMatchARecomputation(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := tempStore(t)
	c.Assert(db.EnsureAccount(ctx, s, db.Account{ID: "a", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, s, db.NewInbox{AccountID: "a", Address: "me@x.test", DefaultDomain: "x.test"})
	c.Assert(err, qt.IsNil)

	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	msg := func(i int, at time.Duration, dir, from string, to, cc, labels []string, refs ...string) db.NewMessage {
		n := db.NewMessage{InboxID: in.ID, MessageID: fmt.Sprintf("<m%d@x.test>", i), Direction: dir, From: from, To: to, Cc: cc,
			Bcc: []string{}, ReplyTo: []string{}, Subject: "s", Text: "t", Timestamp: base.Add(at), Labels: labels,
			References: refs, ThreadCandidates: refs}
		if i == 2 {
			n.Attachments = []db.NewAttachment{{Filename: "a.txt", ContentType: "text/plain", Content: []byte("x")}}
		}
		return n
	}
	rcv := db.InitialLabels(db.Received, false, nil)
	msgs := []db.NewMessage{
		msg(1, 0, db.Received, "ann@y.test", []string{"me@x.test"}, []string{"bob@y.test"}, rcv),
		msg(2, time.Minute, db.Sent, "me@x.test", []string{"ann@y.test"}, nil, db.InitialLabels(db.Sent, false, []string{"important"}), "<m1@x.test>"),
		msg(3, 2*time.Minute, db.Received, "bob@y.test", []string{"me@x.test", "cat@y.test"}, nil, db.InitialLabels(db.Received, false, []string{db.LabelTrash}), "<m2@x.test>"),
		msg(4, 30*time.Second, db.Received, "dan@y.test", []string{"me@x.test"}, nil, rcv, "<m3@x.test>"), // older than the thread's newest
		msg(5, 3*time.Minute, db.Received, "ann@y.test", []string{"me@x.test"}, []string{"eve@y.test"}, rcv, "<m4@x.test>"),
	}
	for _, m := range msgs {
		_, err := db.Deliver(ctx, s, []db.NewMessage{m})
		c.Assert(err, qt.IsNil)
	}
	const cols = "last_ts, last_message, message_count, attachment_count, received_ts, sent_ts, all_trashed, quarantined, senders, recipients, labels"
	row := func() string {
		var v [11]sql.NullString
		dest := make([]any, len(v))
		for i := range v {
			dest[i] = &v[i]
		}
		c.Assert(s.w.QueryRow("SELECT "+cols+" FROM threads").Scan(dest...), qt.IsNil)
		return fmt.Sprint(v)
	}
	var n int
	c.Assert(s.w.QueryRow("SELECT COUNT(*) FROM threads").Scan(&n), qt.IsNil)
	c.Assert(n, qt.Equals, 1)
	incremental := row()
	c.Assert(s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var id int64
		if err := tx.QueryRow("SELECT id FROM threads").Scan(&id); err != nil {
			return err
		}
		return refreshThread(ctx, tx, id)
	}), qt.IsNil)
	c.Assert(incremental, qt.Equals, row())
	c.Assert(incremental, qt.Contains, `["ann@y.test","dan@y.test","me@x.test","bob@y.test"]`) // by time: dan came second
}
