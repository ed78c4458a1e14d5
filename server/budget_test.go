package server_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/server"
)

// TestLargeBodyWaitsForTheBudget answers a large request body 503 (transient, with
// Retry-After) while the memory budget stays spent by mail in progress, and serves
// ordinary requests meanwhile; the retry goes through once the budget is free.
func TestLargeBodyWaitsForTheBudget(t *testing.T) {
	c := qt.New(t)
	budget := server.NewBudget(1 << 20)
	e := newEnvWith(t, serverOptions{api: func(cfg *server.Config) { cfg.Budget = budget }})
	in := e.createInbox("ops")
	release, err := budget.Acquire(context.Background(), 1<<20, time.Second)
	c.Assert(err, qt.IsNil)

	file := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("report ", 30<<10)))
	large := map[string]any{"to": []string{"ann@customer.example"}, "subject": "Report", "text": "Attached.", "idempotencyKey": "report-1",
		"attachments": []any{map[string]any{"filename": "r.txt", "contentType": "text/plain", "content": file}}}
	r := e.fails(http.StatusServiceUnavailable, db.ECodeUnavailable, "POST", inboxPath(in)+"/messages/send", e.full, large)
	c.Check(r.json(t)["error"].(map[string]any)["transient"], qt.Equals, true)
	c.Check(r.header.Get("Retry-After"), qt.Equals, "1")
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full,
		map[string]any{"to": []string{"ann@customer.example"}, "subject": "Hello", "text": "A small one.", "idempotencyKey": "hello-1"})

	release()
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, large)
}
