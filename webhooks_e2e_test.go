package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"
)

// TestServeDeliversSeededWebhook runs the binary with a fixture webhook of a known secret:
// mail over SMTP reaches the receiver as a signed email.received, and the API lists it.
func TestServeDeliversSeededWebhook(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 4)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
	}))
	defer rc.Close()

	dir := t.TempDir()
	fixture := filepath.Join(dir, "fixture.json")
	c.Assert(os.WriteFile(fixture, []byte(`{"accounts": [{"id": "crash", "plan": "exempt",
		"keys": [{"token": "`+crashKey+`", "scopes": ["inboxes:read", "inboxes:write"]}],
		"inboxes": [{"address": "sink@{domain}"}],
		"webhooks": [{"url": "`+rc.URL+`/in", "secret": "`+secret+`", "eventTypes": ["email.received"]}]}]}`), 0o644), qt.IsNil)
	p := startInboxd(t, inboxdBinary(t), "--db", filepath.Join(dir, "inboxd.db"), "--seed", fixture, "--webhook-allow-http")

	cl, err := smtp.Dial(p.smtp)
	c.Assert(err, qt.IsNil)
	msg := "From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: Hooked\r\nMessage-ID: <h-1@customer.example>\r\n\r\nHello!\r\n"
	c.Assert(cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg)), qt.IsNil)
	cl.Quit()

	var d delivery
	select {
	case d = <-got:
	case <-time.After(10 * time.Second):
		t.Fatalf("no webhook delivery: %s", p.log)
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.header.Get("webhook-id") + "." + d.header.Get("webhook-timestamp") + "." + string(d.body)))
	c.Assert(d.header.Get("webhook-signature"), qt.Equals, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	var payload struct {
		Type    string
		Message struct{ Subject string }
	}
	c.Assert(json.Unmarshal(d.body, &payload), qt.IsNil)
	c.Assert(payload.Type, qt.Equals, "email.received")
	c.Assert(payload.Message.Subject, qt.Equals, "Hooked")

	var list struct {
		Webhooks []struct {
			WebhookID, Secret string
		}
	}
	c.Assert(api(t, p.api, "GET", "/v1/webhooks", nil, &list), qt.Equals, 200)
	c.Assert(list.Webhooks, qt.HasLen, 1)
	c.Assert(list.Webhooks[0].Secret, qt.Equals, secret)
	var deliveries struct {
		Deliveries []struct{ Status, EventID string }
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.Assert(api(t, p.api, "GET", "/v1/webhooks/"+list.Webhooks[0].WebhookID+"/deliveries", nil, &deliveries), qt.Equals, 200)
		if len(deliveries.Deliveries) == 1 && deliveries.Deliveries[0].Status == "delivered" {
			break
		}
		c.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("%+v", deliveries))
		time.Sleep(20 * time.Millisecond)
	}
	c.Assert(deliveries.Deliveries[0].EventID, qt.Equals, d.header.Get("webhook-id"))
}
