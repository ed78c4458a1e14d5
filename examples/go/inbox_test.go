// Package example is a complete test of an application's mail against a running inboxd,
// written as for the hosted service: the address and key come from GOSHENEMAIL_BASE_URL
// and GOSHENEMAIL_API_KEY, the variables the official clients read. examples/run.sh
// starts inboxd with examples/fixture.json and runs it; the key is the fixture's.
package example

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"
)

// Two inboxes of examples/fixture.json.
const (
	inbox = "billing@example.test"
	team  = "team@example.test"
)

func TestSentMailArrives(t *testing.T) {
	api := newClient(t)
	since := time.Now().UTC().Format(time.RFC3339Nano)
	subject := fmt.Sprintf("Invoice question %d", time.Now().UnixNano())

	// Send from one inbox to the other: inboxd delivers it locally, as the hosted service
	// does for its own addresses.
	var sent struct{ MessageID, ThreadID string }
	api.call(t, "POST", "/v1/inboxes/"+url.PathEscape(inbox)+"/messages/send", map[string]any{
		"to": []string{team}, "subject": subject, "text": "When is invoice 2026-118 due?",
		"idempotencyKey": "example-" + subject,
	}, &sent)

	// Wait for it to arrive instead of sleeping: the call returns as soon as it is there.
	var got struct {
		Messages []struct{ Subject, From string }
		TimedOut bool
	}
	q := url.Values{"since": {since}, "query": {`subject:"` + subject + `"`}, "timeout": {"10"}}
	api.call(t, "GET", "/v1/inboxes/"+url.PathEscape(team)+"/messages/wait?"+q.Encode(), nil, &got)
	if got.TimedOut || len(got.Messages) != 1 {
		t.Fatalf("the message did not arrive: %+v", got)
	}
	if got.Messages[0].Subject != subject || got.Messages[0].From != inbox {
		t.Errorf("arrived %+v, want subject %q from %s", got.Messages[0], subject, inbox)
	}
}

func TestErrorsHaveTheDocumentedShape(t *testing.T) {
	api := newClient(t)
	status, body := api.raw(t, "GET", "/v1/inboxes/"+url.PathEscape("nobody@example.test"), nil)
	var e struct {
		Error struct {
			Code      string
			Message   string
			Transient bool
		}
	}
	if err := json.Unmarshal(body, &e); err != nil || status != 404 || e.Error.Code != "not_found" {
		t.Fatalf("got %d %s, want 404 not_found", status, body)
	}
}

type client struct{ base, key string }

func newClient(t *testing.T) client {
	c := client{os.Getenv("GOSHENEMAIL_BASE_URL"), os.Getenv("GOSHENEMAIL_API_KEY")}
	if c.base == "" || c.key == "" {
		t.Fatal("set GOSHENEMAIL_BASE_URL and GOSHENEMAIL_API_KEY (examples/run.sh does)")
	}
	return c
}

// call makes one request that must answer 200, decoding the answer into out.
func (c client) call(t *testing.T, method, path string, body, out any) {
	t.Helper()
	status, b := c.raw(t, method, path, body)
	if status != 200 {
		t.Fatalf("%s %s: %d %s", method, path, status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
}

func (c client) raw(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}
