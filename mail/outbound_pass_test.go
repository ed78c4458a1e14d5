package mail

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
)

// TestLocalDeliveryPassesAreBounded sends more large mail to a local inbox than one
// dispatch pass may hold: the first pass delivers some and says more is due, the next
// ones deliver the rest, every attachment intact.
func TestLocalDeliveryPassesAreBounded(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "inboxd.db"), sqlite.Options{})
	c.Assert(err, qt.IsNil)
	defer store.Close()
	c.Assert(db.EnsureAccount(ctx, store, db.Account{ID: "acme", Plan: db.PlanExempt}, nil), qt.IsNil)
	var inboxes []*db.Inbox
	for _, a := range []string{"agent@inboxd.test", "desk@inboxd.test"} {
		in, err := db.CreateInbox(ctx, store, db.NewInbox{AccountID: "acme", Address: a, DefaultDomain: "inboxd.test"})
		c.Assert(err, qt.IsNil)
		inboxes = append(inboxes, in)
	}
	svc := NewService(Config{Store: store, Domain: "inboxd.test", Log: slog.New(slog.DiscardHandler)})

	const n = 6
	files := make([][]byte, n)
	for i := range files {
		files[i] = make([]byte, 3<<20) // about 4 MiB of raw message each
		rand.NewChaCha8([32]byte{byte(i)}).Read(files[i])
		_, err := svc.Send(ctx, inboxes[0], Draft{To: []string{"desk@inboxd.test"}, Subject: "file", Text: "attached",
			IdempotencyKey: string(rune('a' + i)), Attachments: []DraftAttachment{{Filename: "f.bin",
				ContentType: "application/octet-stream", Content: base64.StdEncoding.EncodeToString(files[i])}}})
		c.Assert(err, qt.IsNil)
	}
	cfg := svc.outbound.withDefaults()
	kick := make(chan struct{}, 1)
	c.Assert(svc.dispatchOutbound(ctx, cfg, kick), qt.IsTrue) // more than one pass holds
	delivered := func() int {
		msgs, _, err := store.ListMessages(ctx, inboxes[1].ID, db.MessageFilter{}, 100, "")
		c.Assert(err, qt.IsNil)
		return len(msgs)
	}
	c.Check(delivered() > 0 && delivered() < n, qt.IsTrue, qt.Commentf("%d delivered by the first pass", delivered()))
	for passes := 0; svc.dispatchOutbound(ctx, cfg, kick); passes++ {
		c.Assert(passes < n, qt.IsTrue)
	}
	c.Assert(delivered(), qt.Equals, n)

	msgs, _, err := store.ListMessages(ctx, inboxes[1].ID, db.MessageFilter{}, 100, "")
	c.Assert(err, qt.IsNil)
	got := map[string]bool{}
	for _, m := range msgs {
		c.Assert(m.Attachments, qt.HasLen, 1)
		_, r, err := store.OpenAttachment(ctx, inboxes[1].UUID, m.UUID, m.Attachments[0].AttachmentID)
		c.Assert(err, qt.IsNil)
		b, err := io.ReadAll(r)
		c.Assert(err, qt.IsNil)
		for i, f := range files {
			if bytes.Equal(b, f) {
				got[string(rune('a'+i))] = true
			}
		}
	}
	c.Check(got, qt.HasLen, n)
}
