package sqlite

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/inboxd/inboxd/db"

	qt "github.com/frankban/quicktest"
)

// TestLargeMailRoundTrips stores a message whose raw bytes and attachment are several
// chunks long, with a trace field in front: the raw bytes come back whole (what outbound
// delivery reads) and as a prefix (what the quarantine reviewer reads), the attachments
// byte for byte (also from the middle, as a Range request reads), and deleting the inbox
// leaves no chunk behind.
func TestLargeMailRoundTrips(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "t.db"), Options{})
	c.Assert(err, qt.IsNil)
	defer s.Close()
	c.Assert(db.EnsureAccount(ctx, s, db.Account{ID: "a", Plan: db.PlanExempt}, nil), qt.IsNil)
	in, err := db.CreateInbox(ctx, s, db.NewInbox{AccountID: "a", Address: "me@x.test", DefaultDomain: "x.test"})
	c.Assert(err, qt.IsNil)

	random := func(n int) []byte {
		b := make([]byte, n)
		rand.NewChaCha8([32]byte{byte(n)}).Read(b)
		return b
	}
	raw := append([]byte("Subject: large\r\n\r\n"), random(3*chunkSize+17)...)
	trace := "Received: from a.test\r\n"
	big, small := random(2*chunkSize+5), random(100)
	st, err := db.Deliver(ctx, s, []db.NewMessage{{InboxID: in.ID, MessageID: "<large@x.test>", Direction: db.Received,
		From: "a@a.test", Subject: "large", Text: "see the files", Timestamp: s.Now(), Raw: raw, Trace: trace,
		Labels: db.InitialLabels(db.Received, false, nil), Triage: &db.Triage{Status: db.TriagePending},
		Attachments: []db.NewAttachment{{Filename: "big.bin", ContentType: "application/octet-stream", Content: big},
			{Filename: "small.bin", ContentType: "application/octet-stream", Content: small}}}})
	c.Assert(err, qt.IsNil)

	var body []byte
	c.Assert(s.r.QueryRow("SELECT body FROM messages WHERE id = ?", st[0].RowID).Scan(&body), qt.IsNil)
	got, err := loadRaw(ctx, s.r, st[0].RowID, body, 0)
	c.Assert(err, qt.IsNil)
	c.Check(bytes.Equal(got, append([]byte(trace), raw...)), qt.IsTrue)
	head, err := loadRaw(ctx, s.r, st[0].RowID, body, 100)
	c.Assert(err, qt.IsNil)
	c.Check(bytes.HasPrefix(head, []byte(trace+"Subject: large\r\n")), qt.IsTrue)
	c.Check(len(head) < len(got), qt.IsTrue)

	m, err := s.GetMessage(ctx, in.ID, "<large@x.test>")
	c.Assert(err, qt.IsNil)
	c.Check(m.BodyText, qt.Equals, "see the files")
	c.Assert(m.Attachments, qt.HasLen, 2)
	for i, want := range [][]byte{big, small} {
		a, r, err := s.OpenAttachment(ctx, in.UUID, m.UUID, m.Attachments[i].AttachmentID)
		c.Assert(err, qt.IsNil)
		c.Check(a.Size, qt.Equals, int64(len(want)))
		all, err := io.ReadAll(r)
		c.Assert(err, qt.IsNil)
		c.Check(bytes.Equal(all, want), qt.IsTrue, qt.Commentf("attachment %d", i))
		_, err = r.Seek(int64(len(want)/2), io.SeekStart)
		c.Assert(err, qt.IsNil)
		rest, err := io.ReadAll(r)
		c.Assert(err, qt.IsNil)
		c.Check(bytes.Equal(rest, want[len(want)/2:]), qt.IsTrue, qt.Commentf("attachment %d from its middle", i))
	}

	c.Assert(s.DeleteInbox(ctx, in), qt.IsNil)
	var chunks int
	c.Assert(s.r.QueryRow("SELECT (SELECT COUNT(*) FROM raw_chunks) + (SELECT COUNT(*) FROM attachment_chunks)").Scan(&chunks), qt.IsNil)
	c.Check(chunks, qt.Equals, 0)
}
