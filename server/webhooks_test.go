package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/webhook"
	"github.com/inboxd/inboxd/server"
)

// hookEnv is an env whose server runs the webhook worker, with retries seconds apart
// made milliseconds apart.
type hookEnv struct {
	*env
	worker *webhook.Worker
}

func newHookEnv(t *testing.T, cfg webhook.Config, opts serverOptions) *hookEnv {
	var worker *webhook.Worker
	api := opts.api
	opts.api = func(c *server.Config) {
		c.Webhooks = worker
		if api != nil {
			api(c)
		}
	}
	// The worker needs the store, which newEnvWith opens; the API server takes it after.
	h := &hookEnv{}
	opts.noAPI, opts.noIndex = false, true
	h.env = newEnvWith(t, opts)
	cfg.Store = h.store
	if cfg.Backoff == nil {
		cfg.Backoff = func(int) time.Duration { return 20 * time.Millisecond }
	}
	worker = webhook.New(cfg)
	h.worker = worker
	h.startAPI(nil) // again, now that the worker whose counts /metrics shows exists
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { worker.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is an httptest endpoint that answers with answer(n) (n counts from 1) and
// keeps what it got.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	hits atomic.Int32
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Header.Clone(), body})
		rc.mu.Unlock()
		answer(int(rc.hits.Add(1)), w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func okAnswer(int, http.ResponseWriter, *http.Request) {}

// verifySignature checks a delivery as the Standard Webhooks specification tells a
// receiver to, written from the spec and not from inboxd's signer: the key is the
// base64 after "whsec_", the signed content "<webhook-id>.<webhook-timestamp>.<body>",
// webhook-signature a space-separated list of "v1,<base64 HMAC-SHA256>" of which one must
// match, and the timestamp within five minutes.
func verifySignature(secret string, h http.Header, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sent, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		version, b64, _ := strings.Cut(sig, ",")
		got, err := base64.StdEncoding.DecodeString(b64)
		if version == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// hook creates a webhook through the API.
func (e *hookEnv) hook(body map[string]any) map[string]any {
	e.t.Helper()
	return e.ok("createWebhook", "POST", "/v1/webhooks", e.full, body)
}

func (e *hookEnv) deliveries(id string) []any {
	e.t.Helper()
	return e.ok("listWebhookDeliveries", "GET", "/v1/webhooks/"+id+"/deliveries", e.full, nil)["deliveries"].([]any)
}

// waitDelivery waits until the webhook's newest delivery passes cond, and returns it.
func (e *hookEnv) waitDelivery(id string, cond func(d map[string]any) bool) map[string]any {
	e.t.Helper()
	var last map[string]any
	defer func() {
		if e.t.Failed() {
			e.t.Logf("deliveries: %v", e.deliveries(id))
		}
	}()
	e.eventually("a delivery of webhook "+id, func() bool {
		ds := e.deliveries(id)
		if len(ds) == 0 {
			return false
		}
		last = ds[0].(map[string]any)
		return cond(last)
	})
	return last
}

func status(want string) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["status"] == want }
}

func TestWebhookGetsSignedEmailReceivedOverSMTP(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{}, serverOptions{smtp: &server.SMTPConfig{}})
	e.createInbox("support")
	rc := newReceiver(t, okAnswer)
	hook := e.hook(map[string]any{"url": rc.URL + "/hooks", "description": "CI"})
	c.Assert(hook["enabled"], qt.IsTrue)
	c.Assert(hook["eventTypes"], qt.DeepEquals, []any{})

	raw := "From: ann@sender.example\r\nTo: support@inboxd.test\r\nSubject: Order 42\r\nMessage-ID: <o42@sender.example>\r\n\r\nWhere is my order?\r\n"
	c.Assert(sendSMTP(t, e.smtpAddr, "ann@sender.example", raw), qt.IsNil)
	d := e.waitDelivery(hook["webhookId"].(string), status("delivered"))
	c.Assert(d["attempt"], qt.Equals, 1.0)
	c.Assert(d["responseStatus"], qt.Equals, 200.0)
	c.Assert(d["type"], qt.Equals, db.EventReceived)

	got := rc.requests()
	c.Assert(got, qt.HasLen, 1)
	r := got[0]
	c.Assert(verifySignature(hook["secret"].(string), r.header, r.body), qt.IsTrue, qt.Commentf("%v", r.header))
	c.Assert(verifySignature(db.NewWebhookSecret(), r.header, r.body), qt.IsFalse)
	c.Assert(r.header.Get("Content-Type"), qt.Equals, "application/json")
	for _, h := range []string{"id", "timestamp", "signature"} {
		c.Assert(r.header.Get("svix-"+h), qt.Equals, r.header.Get("webhook-"+h))
	}
	// The body is the Event /openapi.json describes for webhooks and the stream alike.
	c.Assert(e.schema.Response("streamEvents", r.body), qt.IsNil, qt.Commentf("%s", r.body))
	var p struct {
		Type, EventID, InboxID string
		Message                struct {
			Subject, Text string
			From          string
		}
	}
	c.Assert(json.Unmarshal(r.body, &p), qt.IsNil)
	c.Assert(p.Type, qt.Equals, db.EventReceived)
	c.Assert(p.EventID, qt.Equals, r.header.Get("webhook-id"))
	c.Assert(p.EventID, qt.Equals, d["eventId"])
	c.Assert(p.InboxID, qt.Equals, "support@inboxd.test")
	c.Assert(p.Message.Subject, qt.Equals, "Order 42")
	c.Assert(p.Message.Text, qt.Contains, "Where is my order?")
}

func TestWebhookRetriesUntilTheReceiverAnswers(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{}, serverOptions{})
	addr := e.createInbox("support")
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	id := e.hook(map[string]any{"url": rc.URL})["webhookId"].(string)
	e.deliver(addr, db.NewMessage{MessageID: "<r@far.test>", From: "ann@far.test", To: []string{addr}, Subject: "retry", Text: "hi"})
	d := e.waitDelivery(id, status("delivered"))
	c.Assert(d["attempt"], qt.Equals, 3.0)
	c.Assert(d["responseStatus"], qt.Equals, 200.0)
	c.Assert(d["lastAttemptAt"], qt.Equals, d["deliveredAt"])
	got := rc.requests()
	c.Assert(got, qt.HasLen, 3)
	for _, r := range got[1:] { // the same event each time: receivers dedupe on it
		c.Assert(r.header.Get("webhook-id"), qt.Equals, got[0].header.Get("webhook-id"))
		c.Assert(string(r.body), qt.Equals, string(got[0].body))
	}
	metrics := string(e.do("GET", "/metrics", "", nil).body)
	c.Assert(metrics, qt.Contains, `inboxd_webhook_deliveries_total{outcome="delivered"} 1`)
	c.Assert(metrics, qt.Contains, `inboxd_webhook_deliveries_total{outcome="retried"} 2`)
	c.Assert(metrics, qt.Contains, "inboxd_webhook_backlog 0")
}

func TestWebhookFailsForGoodAfterItsWindow(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{Window: 200 * time.Millisecond}, serverOptions{})
	addr := e.createInbox("support")
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	id := e.hook(map[string]any{"url": rc.URL})["webhookId"].(string)
	e.deliver(addr, db.NewMessage{MessageID: "<f@far.test>", From: "ann@far.test", To: []string{addr}, Subject: "fail", Text: "hi"})
	d := e.waitDelivery(id, status("failed"))
	c.Assert(d["error"], qt.Equals, "HTTP 500")
	c.Assert(d["nextAttemptAt"], qt.IsNil)
	c.Assert(d["attempt"].(float64) >= 2, qt.IsTrue)
}

func TestWebhookSlowOrRedirectingEndpointDelaysNoOther(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{Timeout: 2 * time.Second, PerWebhook: 2, Backoff: func(int) time.Duration { return time.Hour }}, serverOptions{})
	addr := e.createInbox("support")
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	hang := newReceiver(t, func(int, http.ResponseWriter, *http.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		inFlight.Add(-1)
	})
	t.Cleanup(func() { close(release) })
	redirect := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
	})
	good := newReceiver(t, okAnswer)
	slowID := e.hook(map[string]any{"url": hang.URL})["webhookId"].(string)
	redirectID := e.hook(map[string]any{"url": redirect.URL})["webhookId"].(string)
	goodID := e.hook(map[string]any{"url": good.URL})["webhookId"].(string)

	start := time.Now()
	for i := range 5 {
		id := "<s" + strconv.Itoa(i) + "@far.test>"
		e.deliver(addr, db.NewMessage{MessageID: id, From: "ann@far.test", To: []string{addr}, Subject: "slow", Text: "hi"})
	}
	e.eventually("the good endpoint gets every event", func() bool { return len(good.requests()) == 5 })
	c.Assert(time.Since(start) < 2*time.Second, qt.IsTrue, qt.Commentf("took %v", time.Since(start)))
	c.Assert(most.Load() <= 2, qt.IsTrue, qt.Commentf("%d attempts at once to one endpoint", most.Load()))

	d := e.waitDelivery(redirectID, func(d map[string]any) bool { return d["attempt"] == 1.0 })
	c.Assert(d["status"], qt.Equals, "pending")
	c.Assert(d["responseStatus"], qt.Equals, 302.0)
	c.Assert(redirect.requests(), qt.HasLen, 5) // and none followed the redirect elsewhere

	e.eventually("an attempt to the slow endpoint", func() bool {
		ds := e.deliveries(slowID)
		d = ds[len(ds)-1].(map[string]any) // the oldest: attempts to it go two at a time
		return d["attempt"] == 1.0
	})
	c.Assert(d["status"], qt.Equals, "pending")
	c.Assert(d["error"], qt.Equals, "no answer within 2s")
	c.Assert(d["responseStatus"], qt.IsNil)
	c.Assert(e.deliveries(goodID), qt.HasLen, 5)
}

func TestWebhookDisabledGetsNothingAndDeletedDropsPending(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{Backoff: func(int) time.Duration { return time.Hour }}, serverOptions{})
	addr := e.createInbox("support")
	rc := newReceiver(t, okAnswer)
	off := e.hook(map[string]any{"url": rc.URL + "/off"})["webhookId"].(string)
	got := e.ok("updateWebhook", "PATCH", "/v1/webhooks/"+off, e.full, map[string]any{"enabled": false})
	c.Assert(got["enabled"], qt.IsFalse)
	failing := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	doomed := e.hook(map[string]any{"url": failing.URL})["webhookId"].(string)

	e.deliver(addr, db.NewMessage{MessageID: "<d@far.test>", From: "ann@far.test", To: []string{addr}, Subject: "x", Text: "hi"})
	e.waitDelivery(doomed, func(d map[string]any) bool { return d["attempt"] == 1.0 })
	c.Assert(e.deliveries(off), qt.HasLen, 0)
	e.ok("updateWebhook", "PATCH", "/v1/webhooks/"+off, e.full, map[string]any{"enabled": true})
	time.Sleep(100 * time.Millisecond)
	c.Assert(rc.requests(), qt.HasLen, 0) // the event of its disabled time is never delivered

	c.Assert(string(e.do("GET", "/metrics", "", nil).body), qt.Contains, "inboxd_webhook_backlog 1")
	c.Assert(e.ok("deleteWebhook", "DELETE", "/v1/webhooks/"+doomed, e.full, nil), qt.DeepEquals, map[string]any{"deleted": true})
	c.Assert(string(e.do("GET", "/metrics", "", nil).body), qt.Contains, "inboxd_webhook_backlog 0")
	e.fails(404, db.ECodeNotFound, "GET", "/v1/webhooks/"+doomed+"/deliveries", e.full, nil)
	e.fails(404, db.ECodeNotFound, "DELETE", "/v1/webhooks/"+doomed, e.full, nil)
}

func TestWebhookFiltersByTypeAndInbox(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{}, serverOptions{})
	one, two := e.createInbox("one"), e.createInbox("two")
	rc := newReceiver(t, okAnswer)
	hook := e.hook(map[string]any{"url": rc.URL, "eventTypes": []string{db.EventLabelsUpdated}, "inboxIds": []string{strings.ToUpper(two)}})
	c.Assert(hook["inboxIds"], qt.DeepEquals, []any{two})
	for _, addr := range []string{one, two} {
		e.deliver(addr, db.NewMessage{MessageID: "<m@far.test>", From: "ann@far.test", To: []string{addr}, Subject: "x", Text: "hi"})
		e.ok("updateMessageLabels", "PATCH", msgPath(addr, "<m@far.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	}
	e.eventually("the labels event", func() bool { return len(rc.requests()) == 1 })
	time.Sleep(50 * time.Millisecond)
	got := rc.requests()
	c.Assert(got, qt.HasLen, 1)
	var p map[string]any
	c.Assert(json.Unmarshal(got[0].body, &p), qt.IsNil)
	c.Assert(p["type"], qt.Equals, db.EventLabelsUpdated)
	c.Assert(p["inboxId"], qt.Equals, two)
}

func TestWebhookCRUDAndValidation(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{}, serverOptions{})
	addr := e.createInbox("support")
	otherInbox := e.ok("createInbox", "POST", "/v1/inboxes", e.other, map[string]any{"username": "theirs"})["inboxId"].(string)
	for _, body := range []any{
		map[string]any{"url": "http://hooks.example.com/x"},
		map[string]any{"url": "ftp://hooks.example.com/x"},
		map[string]any{"url": "https://user:pw@hooks.example.com/x"},
		map[string]any{"url": "https://hooks.example.com/x#part"},
		map[string]any{"url": "https://hooks.example.com/" + strings.Repeat("a", 2048)},
		map[string]any{"url": "https://hooks.example.com/x", "inboxIds": []string{otherInbox}},
		map[string]any{"url": "https://hooks.example.com/x", "inboxIds": []string{"nobody@inboxd.test"}},
		map[string]any{"url": "https://hooks.example.com/x", "eventTypes": []string{"email.sent"}},
		map[string]any{"url": "https://hooks.example.com/x", "eventTypes": []string{db.EventReceived, db.EventReceived}},
		map[string]any{"url": "https://hooks.example.com/x", "description": strings.Repeat("d", 201)},
		map[string]any{"url": "https://hooks.example.com/x", "secret": "whsec_AAAA"},
		map[string]any{},
	} {
		e.fails(422, db.ECodeInvalidArgument, "POST", "/v1/webhooks", e.full, body)
	}
	c.Assert(e.ok("listWebhooks", "GET", "/v1/webhooks", e.full, nil)["webhooks"], qt.DeepEquals, []any{})

	hook := e.hook(map[string]any{"url": "https://hooks.example.com/x", "inboxIds": []string{addr}, "eventTypes": []string{db.EventReceived}})
	id := hook["webhookId"].(string)
	c.Assert(hook["description"], qt.Equals, "")
	c.Assert(strings.HasPrefix(hook["secret"].(string), "whsec_"), qt.IsTrue)
	c.Assert(e.ok("getWebhook", "GET", "/v1/webhooks/"+strings.ToUpper(id), e.full, nil), qt.DeepEquals, hook)
	e.fails(404, db.ECodeNotFound, "GET", "/v1/webhooks/"+id, e.other, nil)
	e.fails(404, db.ECodeNotFound, "PATCH", "/v1/webhooks/"+id, e.other, map[string]any{"enabled": false})
	e.fails(404, db.ECodeNotFound, "GET", "/v1/webhooks/0b5e9c1e-8a4f-4d2b-9c3e-2f1a6d7e8b90", e.full, nil)
	e.fails(422, db.ECodeInvalidArgument, "GET", "/v1/webhooks/not-a-uuid", e.full, nil)
	e.fails(422, db.ECodeInvalidArgument, "PATCH", "/v1/webhooks/"+id, e.full, map[string]any{})
	e.fails(422, db.ECodeInvalidArgument, "PATCH", "/v1/webhooks/"+id, e.full, map[string]any{"url": "http://10.1.2.3/x"})
	e.fails(422, db.ECodeInvalidArgument, "GET", "/v1/webhooks?limit=101", e.full, nil)
	e.fails(422, db.ECodeInvalidArgument, "GET", "/v1/webhooks?color=red", e.full, nil)
	e.fails(422, db.ECodeInvalidArgument, "GET", "/v1/webhooks?pageToken=forged", e.full, nil)
	c.Assert(e.ok("getWebhook", "GET", "/v1/webhooks/"+id, e.full, nil), qt.DeepEquals, hook) // nothing changed

	up := e.ok("updateWebhook", "PATCH", "/v1/webhooks/"+id, e.full, map[string]any{"inboxIds": []string{}, "description": "all inboxes"})
	c.Assert(up["inboxIds"], qt.DeepEquals, []any{})
	c.Assert(up["eventTypes"], qt.DeepEquals, []any{db.EventReceived})
	c.Assert(up["secret"], qt.Equals, hook["secret"])

	for i := 1; i < db.MaxWebhooks; i++ {
		e.hook(map[string]any{"url": "https://hooks.example.com/" + strconv.Itoa(i)})
	}
	e.fails(409, db.ECodeWebhookLimit, "POST", "/v1/webhooks", e.full, map[string]any{"url": "https://hooks.example.com/21"})
	page := e.ok("listWebhooks", "GET", "/v1/webhooks", e.full, nil)
	c.Assert(page["webhooks"], qt.HasLen, 20)
	c.Assert(page["nextPageToken"], qt.IsNil)
	page = e.ok("listWebhooks", "GET", "/v1/webhooks?limit=15", e.full, nil)
	c.Assert(page["webhooks"].([]any)[14].(map[string]any)["url"], qt.Equals, "https://hooks.example.com/5")
	rest := e.ok("listWebhooks", "GET", "/v1/webhooks?limit=15&pageToken="+page["nextPageToken"].(string), e.full, nil)
	c.Assert(rest["webhooks"], qt.HasLen, 5)
	c.Assert(e.ok("listWebhooks", "GET", "/v1/webhooks", e.other, nil)["webhooks"], qt.DeepEquals, []any{})
}

func TestWebhookHTTPAllowedByTheServerFlag(t *testing.T) {
	e := newHookEnv(t, webhook.Config{}, serverOptions{api: func(c *server.Config) { c.WebhookAllowHTTP = true }})
	e.hook(map[string]any{"url": "http://hooks.internal:8080/x"})
}

func TestWebhookOperationsNeedAnAccountKeyWithTheScope(t *testing.T) {
	e := newHookEnv(t, webhook.Config{}, serverOptions{})
	addr := e.createInbox("support")
	mailbox := e.mailboxKey("acme", addr)
	none := e.newKey("acme", db.ScopeMessagesRead)
	id := e.hook(map[string]any{"url": "https://hooks.example.com/x"})["webhookId"].(string)
	for _, op := range []struct {
		method, path string
		body         any
		write        bool
	}{
		{"POST", "/v1/webhooks", map[string]any{"url": "https://hooks.example.com/y"}, true},
		{"GET", "/v1/webhooks", nil, false},
		{"GET", "/v1/webhooks/" + id, nil, false},
		{"PATCH", "/v1/webhooks/" + id, map[string]any{"enabled": false}, true},
		{"DELETE", "/v1/webhooks/" + id, nil, true},
		{"GET", "/v1/webhooks/" + id + "/deliveries", nil, false},
	} {
		e.fails(401, db.ECodeUnauthorized, op.method, op.path, "", op.body)
		e.fails(401, db.ECodeUnauthorized, op.method, op.path, "bze_nope", op.body)
		e.fails(403, db.ECodeForbidden, op.method, op.path, mailbox, op.body)
		e.fails(403, db.ECodeForbidden, op.method, op.path, none, op.body)
		if op.write {
			e.fails(403, db.ECodeForbidden, op.method, op.path, e.readOnly, op.body)
		} else {
			e.do(op.method, op.path, e.readOnly, op.body) // inboxes:read is enough
		}
	}
	qt.Assert(t, e.ok("getWebhook", "GET", "/v1/webhooks/"+id, e.full, nil)["enabled"], qt.IsTrue)
}

// The URL rules on the forms people write: loopback by its name, by any address of
// 127.0.0.0/8 or by [::1], not by a name that DNS answers (the absolute "localhost." is
// one); a port is a port; the length is counted in characters.
func TestWebhookURLForms(t *testing.T) {
	e := newHookEnv(t, webhook.Config{}, serverOptions{})
	for _, u := range []string{"http://localhost/x", "http://LOCALHOST:3000/x", "http://127.1.2.3/x", "http://[::1]:9000/x", "https://hooks.example.com:8443/x?a=1",
		"https://hooks.example.com/" + strings.Repeat("é", 2048-26)} { // 2,048 characters, more bytes
		qt.Check(t, e.hook(map[string]any{"url": u})["url"], qt.Equals, u)
	}
	for _, u := range []string{"http://localhost./x", "http://sub.localhost/x", "http://127.0.0.1.nip.io/x", "http://0x7f.1/x", "http://2130706433/x",
		"https://hooks.example.com/" + strings.Repeat("é", 2049-26), "https://hooks.example.com:99999/x", "https://hooks.example.com:0/x", "http://localhost:65536/x", "https:///x"} {
		r := e.fails(422, db.ECodeInvalidArgument, "POST", "/v1/webhooks", e.full, map[string]any{"url": u})
		qt.Check(t, string(r.body), qt.Contains, `"url: `, qt.Commentf("%s", u))
	}
}

// A webhook made at http:// to a host the API refuses (by a fixture, or while the server
// ran with --webhook-allow-http) can still be disabled and described: an update checks
// the URL it gives, not the one the webhook has.
func TestWebhookAtAnotherHostOverHTTPCanStillBeUpdated(t *testing.T) {
	c := qt.New(t)
	e := newHookEnv(t, webhook.Config{}, serverOptions{})
	hook, err := db.CreateWebhook(context.Background(), e.store, db.NewWebhook{AccountID: "acme", URL: "http://app:3000/hook", AllowHTTP: true})
	c.Assert(err, qt.IsNil)
	path := "/v1/webhooks/" + hook.WebhookID
	c.Assert(e.ok("updateWebhook", "PATCH", path, e.full, map[string]any{"enabled": false})["enabled"], qt.IsFalse)
	up := e.ok("updateWebhook", "PATCH", path, e.full, map[string]any{"description": "the app under test", "eventTypes": []string{db.EventReceived}})
	c.Assert(up["url"], qt.Equals, "http://app:3000/hook")
	c.Assert(up["description"], qt.Equals, "the app under test")
	e.fails(422, db.ECodeInvalidArgument, "PATCH", path, e.full, map[string]any{"url": "http://app:3001/hook"})
}

// With the test clock moved (POST /_inboxd/clock), deliveries still verify: a receiver's
// library checks webhook-timestamp against its own clock, within five minutes, so the
// header is the wall clock's time of the attempt, whatever the rules' clock says.
func TestWebhookVerifiesAfterTheTestClockMoved(t *testing.T) {
	clock := &db.Clock{}
	e := newHookEnv(t, webhook.Config{}, serverOptions{now: clock.Now})
	in := e.createInbox("support")
	rc := newReceiver(t, okAnswer)
	hook := e.hook(map[string]any{"url": rc.URL + "/hooks"})
	clock.Advance(8 * 24 * time.Hour)
	e.deliver(in, db.NewMessage{MessageID: "<late@far.test>", From: "ann@far.test", To: []string{in}, Subject: "late", Text: "t"})
	e.eventually("the delivery", func() bool { return len(rc.requests()) > 0 }) // the env's keys have expired
	r := rc.requests()[0]
	qt.Assert(t, verifySignature(hook["secret"].(string), r.header, r.body), qt.IsTrue, qt.Commentf("%v", r.header))
}
