package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
)

// A webhook another process commits (`inboxd seed` beside a running server) gets the
// events the server records after it, although the server had read the account's webhooks
// (none) before.
func TestWebhookOfAnotherProcessGetsTheNextEvent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	server, err := sqlite.Open(ctx, path, sqlite.Options{})
	qt.Assert(t, err, qt.IsNil)
	defer server.Close()
	in := setup(t, server)
	receive := func(id string) {
		t.Helper()
		_, err := db.Deliver(ctx, server, []db.NewMessage{{InboxID: in.ID, MessageID: id, Direction: db.Received,
			From: "ann@far.test", To: []string{in.Address}, Subject: "s", Text: "t", Timestamp: server.Now(),
			Labels: db.InitialLabels(db.Received, false, nil), Raw: []byte("Message-ID: " + id + "\r\n\r\nt\r\n")}})
		qt.Assert(t, err, qt.IsNil)
	}
	receive("<before@far.test>") // the server reads the account's webhooks: none

	seed, err := sqlite.Open(ctx, path, sqlite.Options{})
	qt.Assert(t, err, qt.IsNil)
	w, err := db.CreateWebhook(ctx, seed, db.NewWebhook{AccountID: "a", URL: "http://127.0.0.1:9/hook"})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, seed.Close(), qt.IsNil)

	receive("<after@far.test>")
	ds, _, err := server.ListHookDeliveries(ctx, "a", w.WebhookID, 10, "")
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, ds, qt.HasLen, 1)
}
