package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// Two inboxd processes on one PostgreSQL database answer alike (extensions section 9):
// mail sent through one is listed, read and found by search on the other at once, and an
// inbox created on one is there on the other.
func TestTwoProcessesOnPostgres(t *testing.T) {
	c := qt.New(t)
	url := pgtest.NewDatabase(t)
	dir := t.TempDir()
	start := func(name string, seeds ...string) *faultServer {
		m := &Main{DBPath: url, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", DNS: "off", Seeds: seeds}
		c.Assert(m.Run(context.Background()), qt.IsNil, qt.Commentf("process %s", name))
		t.Cleanup(func() { m.Close() })
		return &faultServer{t: t, m: m, base: "http://" + m.Addr()}
	}
	a := start("a", writeFixture(t, dir))
	b := start("b")

	for i := range 3 {
		status, body := a.do("POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
			"to": []string{"sink@inboxd.test"}, "subject": fmt.Sprintf("Kohlrabi report %d", i), "text": "hi", "idempotencyKey": fmt.Sprint(i)})
		c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
		var sent struct{ MessageID string }
		c.Assert(json.Unmarshal(body, &sent), qt.IsNil)

		status, body = b.do("GET", messageURL("agent@inboxd.test", sent.MessageID), nil)
		c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
		status, body = b.do("GET", "/v1/inboxes/agent%40inboxd.test/messages/search?query=kohlrabi", nil)
		c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
		var found struct{ Messages []struct{ Subject string } }
		c.Assert(json.Unmarshal(body, &found), qt.IsNil)
		c.Assert(found.Messages, qt.HasLen, i+1, qt.Commentf("%s", body))
	}
	status, body := b.do("GET", "/v1/inboxes/agent%40inboxd.test/messages", nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	var page struct{ Messages []struct{ Subject string } }
	c.Assert(json.Unmarshal(body, &page), qt.IsNil)
	c.Assert(page.Messages, qt.HasLen, 3)

	status, body = b.do("POST", "/v1/inboxes", map[string]any{"username": "desk"})
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	status, body = a.do("GET", "/v1/inboxes/desk%40inboxd.test", nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
}
