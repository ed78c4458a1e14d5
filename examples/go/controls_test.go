package example

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// The test controls a suite drives between and inside its tests (docs/ci.md): reset,
// inject, wait, the outbox, a fault rule and the clock. examples/run.sh starts inboxd
// with --test-controls.
func TestWithTheTestControls(t *testing.T) {
	api := newClient(t)
	box := "/v1/inboxes/" + url.PathEscape(inbox)
	control := "/_inboxd/inboxes/" + url.PathEscape(inbox)
	var ok map[string]any
	api.call(t, "POST", "/_inboxd/reset", nil, &ok) // the fixture's state, whatever ran before

	// A customer writes in, without SMTP; the test waits for it like the product would.
	since := time.Now().UTC().Format(time.RFC3339Nano)
	var injected struct{ MessageID, ThreadID string }
	api.call(t, "POST", control+"/messages", map[string]any{"from": "ann@customer.example",
		"subject": "Double charge on invoice 2026-118", "text": "I was charged twice."}, &injected)
	var waited struct {
		Messages []struct{ MessageID string }
		TimedOut bool
	}
	q := url.Values{"since": {since}, "query": {"double charge"}, "timeout": {"10"}}
	api.call(t, "GET", box+"/messages/wait?"+q.Encode(), nil, &waited)
	if waited.TimedOut || len(waited.Messages) != 1 || waited.Messages[0].MessageID != injected.MessageID {
		t.Fatalf("waited for the injected message, got %+v", waited)
	}

	// The product replies; the outbox shows the MIME that left.
	api.call(t, "POST", box+"/messages/"+url.PathEscape(injected.MessageID)+"/reply", map[string]any{
		"text": "Refunded.", "idempotencyKey": "reply-" + injected.MessageID}, &ok)
	var outbox struct{ Messages []struct{ Raw string } }
	api.call(t, "GET", "/_inboxd/outbox?to=ann@customer.example", nil, &outbox)
	if len(outbox.Messages) != 1 || !strings.Contains(outbox.Messages[0].Raw, "In-Reply-To: "+injected.MessageID) {
		t.Fatalf("the reply is not in the outbox: %+v", outbox)
	}

	// The next send fails once with a 503, as the product's retry logic must handle.
	api.call(t, "PUT", "/_inboxd/faults", map[string]any{"rules": []any{map[string]any{"target": "api",
		"match": map[string]any{"operation": "send"}, "effect": map[string]any{"status": 503, "code": "unavailable", "transient": true},
		"times": 1}}}, &ok)
	send := map[string]any{"to": []string{"ann@customer.example"}, "subject": "Receipt", "text": "Here it is.", "idempotencyKey": "receipt-1"}
	if status, body := api.raw(t, "POST", box+"/messages/send", send); status != 503 || !strings.Contains(string(body), `"transient":true`) {
		t.Fatalf("first send: %d %s, want the fault's 503", status, body)
	}
	api.call(t, "POST", box+"/messages/send", send, &ok) // the retry, with the same key, goes through

	// A day later, as far as the server is concerned.
	var clock struct{ Now string }
	api.call(t, "POST", "/_inboxd/clock", map[string]any{"advanceSeconds": 86400}, &clock)
	if now, _ := time.Parse(time.RFC3339, clock.Now); now.Before(time.Now().Add(23 * time.Hour)) {
		t.Fatalf("the clock did not move: %s", clock.Now)
	}

	// A key of the test's own, revoked to see the product handle "the key was revoked",
	// and an account disabled.
	var key struct{ KeyID, Key string }
	api.call(t, "POST", "/_inboxd/keys", map[string]any{"accountId": "example", "scopes": []string{"inboxes:read"}}, &key)
	own := client{api.base, key.Key}
	api.call(t, "DELETE", "/_inboxd/keys/"+key.KeyID, nil, &ok)
	if status, _ := own.raw(t, "GET", "/v1/inboxes", nil); status != 401 {
		t.Fatalf("a revoked key answered %d, want 401", status)
	}
	api.call(t, "POST", "/_inboxd/accounts/example/disable", nil, &ok)
	if status, _ := api.raw(t, "GET", "/v1/inboxes", nil); status != 403 {
		t.Fatalf("a disabled account's key answered %d, want 403", status)
	}

	api.call(t, "POST", "/_inboxd/reset", nil, &ok) // and back: accounts, keys, clock, mail, outbox, faults
	if status, _ := api.raw(t, "GET", "/v1/inboxes", nil); status != 200 {
		t.Fatalf("after the reset the fixture's key answered %d, want 200", status)
	}
}
