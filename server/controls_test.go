package server_test

import (
	"net/http"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/server"
)

// newControlsEnv is an env whose server serves the test controls on its own clock.
func newControlsEnv(t *testing.T) *env {
	clock := &db.Clock{}
	return newEnvWith(t, serverOptions{now: clock.Now, api: func(c *server.Config) { c.TestControls, c.Clock = true, clock }})
}

func TestTestControlsAreAbsentWithoutTheFlag(t *testing.T) {
	e := newEnv(t)
	for _, r := range []struct{ method, path string }{
		{"POST", "/_inboxd/keys"}, {"DELETE", "/_inboxd/keys/key_0123456789abcdef"}, {"GET", "/_inboxd/clock"},
		{"POST", "/_inboxd/clock"}, {"POST", "/_inboxd/accounts/acme/disable"},
	} {
		e.fails(http.StatusNotFound, "not_found", r.method, r.path, "", map[string]any{"advanceSeconds": 1})
	}
}

func TestTestKeysWorkAndAreRevoked(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	k := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}})
	key, id := k["key"].(string), k["keyId"].(string)
	e.ok("listInboxes", "GET", "/v1/inboxes", key, nil)
	e.fails(http.StatusForbidden, "forbidden", "POST", "/v1/inboxes", key, map[string]any{"username": "x"})

	mk := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "inboxId": box})
	mailbox := mk["key"].(string)
	e.ok("listMessages", "GET", inboxPath(box)+"/messages", mailbox, nil)
	again := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "inboxId": box})
	e.ok("listMessages", "GET", inboxPath(box)+"/messages", mailbox, nil) // a test's new key leaves the others working
	e.ok("listMessages", "GET", inboxPath(box)+"/messages", again["key"].(string), nil)

	e.ok("revokeTestKey", "DELETE", "/_inboxd/keys/"+id, "", nil)
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/v1/inboxes", key, nil)
	e.fails(http.StatusNotFound, "not_found", "DELETE", "/_inboxd/keys/key_0123456789abcdef", "", nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "DELETE", "/_inboxd/keys/"+key, "", nil)
}

func TestTestKeyRequestsAreChecked(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	for _, bad := range []struct {
		status int
		code   string
		body   map[string]any
	}{
		{422, "invalid_argument", map[string]any{"accountId": "acme"}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "inboxId": box}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read", "inboxes:read"}}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:fly"}}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "inboxId": box, "days": 3}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "days": 400}},
		{422, "invalid_argument", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "extra": 1}},
		{404, "not_found", map[string]any{"accountId": "nobody", "scopes": []string{"inboxes:read"}}},
		{404, "not_found", map[string]any{"accountId": "other", "inboxId": box}},
	} {
		e.fails(bad.status, bad.code, "POST", "/_inboxd/keys", "", bad.body)
	}
}

func TestDisabledAccountsAreDeniedUntilEnabled(t *testing.T) {
	e := newControlsEnv(t)
	got := e.ok("disableAccount", "POST", "/_inboxd/accounts/acme/disable", "", nil)
	qt.Assert(t, got, qt.DeepEquals, map[string]any{"accountId": "acme", "disabled": true})
	e.fails(http.StatusForbidden, "access_denied", "GET", "/v1/inboxes", e.full, nil)
	e.ok("listInboxes", "GET", "/v1/inboxes", e.other, nil)
	e.ok("enableAccount", "POST", "/_inboxd/accounts/acme/enable", "", nil)
	e.ok("listInboxes", "GET", "/v1/inboxes", e.full, nil)
	e.fails(http.StatusNotFound, "not_found", "POST", "/_inboxd/accounts/nobody/disable", "", nil)
}

func TestTheClockMovesForwardForKeyExpiry(t *testing.T) {
	e := newControlsEnv(t)
	before := e.ok("getClock", "GET", "/_inboxd/clock", "", nil)["now"].(string)
	k := e.ok("createTestKey", "POST", "/_inboxd/keys", "", map[string]any{"accountId": "acme", "scopes": []string{"inboxes:read"}, "days": 2})
	key := k["key"].(string)
	e.ok("listInboxes", "GET", "/v1/inboxes", key, nil)
	after := e.ok("advanceClock", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 2*86400 + 1})["now"].(string)
	qt.Assert(t, after > before, qt.IsTrue, qt.Commentf("%s, then %s", before, after))
	qt.Assert(t, after[:10] > before[:10], qt.IsTrue) // two days on
	e.fails(http.StatusUnauthorized, "unauthorized", "GET", "/v1/inboxes", key, nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": 0})
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "POST", "/_inboxd/clock", "", map[string]any{"advanceSeconds": -5})
}

func TestTheOutboxShowsWhatWasSentAndPurgeEmptiesAnInbox(t *testing.T) {
	e := newControlsEnv(t)
	box := e.createInbox("desk")
	send := func(key, to string) {
		e.ok("send", "POST", inboxPath(box)+"/messages/send", e.full, map[string]any{"to": []string{to}, "subject": "hello " + key,
			"text": "hi", "idempotencyKey": key})
	}
	send("k1", "ann@far.example")
	send("k2", "bob@far.example")
	out := e.ok("listOutbox", "GET", "/_inboxd/outbox", "", nil)["messages"].([]any)
	qt.Assert(t, out, qt.HasLen, 2)
	last := out[0].(map[string]any)
	qt.Assert(t, last["subject"], qt.Equals, "hello k2")
	qt.Assert(t, last["raw"], qt.Matches, `(?s).*Subject: hello k2\r\n.*`)
	qt.Assert(t, last["inboxId"], qt.Equals, box)
	only := e.ok("listOutbox", "GET", "/_inboxd/outbox?to=ANN@far.example&limit=5", "", nil)["messages"].([]any)
	qt.Assert(t, only, qt.HasLen, 1)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", "/_inboxd/outbox?limit=1001", "", nil)
	e.fails(http.StatusUnprocessableEntity, "invalid_argument", "GET", "/_inboxd/outbox?color=red", "", nil)

	e.ok("clearOutbox", "DELETE", "/_inboxd/outbox", "", nil)
	qt.Assert(t, e.ok("listOutbox", "GET", "/_inboxd/outbox", "", nil)["messages"], qt.HasLen, 0)

	got := e.ok("purgeMessages", "DELETE", "/_inboxd"+strings.TrimPrefix(inboxPath(box), "/v1")+"/messages", "", nil)
	qt.Assert(t, got["deleted"], qt.Equals, 2.0)
	qt.Assert(t, e.ok("listMessages", "GET", inboxPath(box)+"/messages?labels=sent", e.full, nil)["messages"], qt.HasLen, 0)
	e.fails(http.StatusNotFound, "not_found", "DELETE", "/_inboxd/inboxes/nobody%40inboxd.test/messages", "", nil)
	e.ok("deleteInbox", "DELETE", inboxPath(box), e.full, nil)
	e.fails(http.StatusGone, "inbox_retired", "DELETE", "/_inboxd"+strings.TrimPrefix(inboxPath(box), "/v1")+"/messages", "", nil)
}
