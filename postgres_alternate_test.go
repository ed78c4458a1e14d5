package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
	"github.com/inboxd/inboxd/schema"
)

// Every operation alternately on two processes (extensions section 9: "every operation
// gives the same answer whichever process serves it, including right after a write on
// another process"): a story that drives each operation of the table the server builds
// its routes and /openapi.json from, each call on the other process than the one before,
// so that each write is read back on the process that did not make it, at once. An
// operation added to the table and not to the story fails the test, by name.

// alternator makes the calls of the story, each on the other process than the one before.
type alternator struct {
	t      *testing.T
	procs  []*proc
	client *http.Client
	ops    map[string]schema.Operation
	next   int                     // the process of the next call
	driven map[string]map[int]bool // operationId -> the processes it ran on
}

// path is op's path with params in its {name} segments, in order, and query.
func (x *alternator) path(op schema.Operation, params []string, query string) string {
	x.t.Helper()
	qt.Assert(x.t, params, qt.HasLen, len(op.PathParams), qt.Commentf("%s takes %v", op.ID, op.PathParams))
	p := op.Path
	for i, name := range op.PathParams {
		p = strings.Replace(p, "{"+name+"}", url.PathEscape(params[i]), 1)
	}
	if query != "" {
		p += "?" + query
	}
	return p
}

// turn returns the process of the next call, and moves the turn to the other.
func (x *alternator) turn(op string) (*proc, int) {
	i := x.next
	x.next = 1 - i
	if x.driven[op] == nil {
		x.driven[op] = map[int]bool{}
	}
	x.driven[op][i] = true
	return x.procs[i], i
}

// call runs operation id with key on the process whose turn it is, with its path params,
// query and JSON body; it wants the status want and decodes the answer into out.
func (x *alternator) call(key, id string, params []string, query string, body any, want int, out any) {
	x.t.Helper()
	op, ok := x.ops[id]
	qt.Assert(x.t, ok, qt.IsTrue, qt.Commentf("no operation %s", id))
	p, i := x.turn(id)
	x.on(p, i, key, op, params, query, body, want, out)
}

func (x *alternator) on(p *proc, i int, key string, op schema.Operation, params []string, query string, body any, want int, out any) {
	x.t.Helper()
	req, err := apiRequest(p.api, key, op.Method, x.path(op, params, query), body)
	qt.Assert(x.t, err, qt.IsNil)
	res, err := x.client.Do(req)
	qt.Assert(x.t, err, qt.IsNil)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	qt.Assert(x.t, err, qt.IsNil)
	qt.Assert(x.t, res.StatusCode, qt.Equals, want, qt.Commentf("%s on process %c: %s", op.ID, 'a'+i, b))
	if out != nil {
		qt.Assert(x.t, json.Unmarshal(b, out), qt.IsNil, qt.Commentf("%s: %s", op.ID, b))
	}
}

// do is call with the account key of the fixture, wanting 200.
func (x *alternator) do(id string, params []string, query string, body, out any) {
	x.t.Helper()
	x.call(crashKey, id, params, query, body, 200, out)
}

// eventually runs operation id with key on the process whose turn it is until it answers
// want, for what the spec bounds by time rather than making at once (key revocation and
// account changes reach the other processes within 1 s).
func (x *alternator) eventually(key, id string, params []string, want int) {
	x.t.Helper()
	op := x.ops[id]
	p, _ := x.turn(id)
	eventually(x.t, p, key, op.Method, x.path(op, params, ""), want)
}

// coverage fails the test for each operation of the table the story did not drive.
func (x *alternator) coverage() {
	x.t.Helper()
	for _, op := range schema.Operations() {
		if len(x.driven[op.ID]) == 0 {
			x.t.Errorf("operation %s (%s %s) is not driven on two processes: add it to TestEveryOperationAlternatelyOnPostgres", op.ID, op.Method, op.Path)
		}
	}
}

// TestEveryOperationAlternatelyOnPostgres drives every operation alternately on two
// processes on one database: see the top of this file.
func TestEveryOperationAlternatelyOnPostgres(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dbURL := pgtest.NewDatabase(t)
	bin := inboxdBinary(t)
	seed := writeFixture(t, t.TempDir())
	x := &alternator{t: t, client: &http.Client{Timeout: 20 * time.Second}, ops: map[string]schema.Operation{}, driven: map[string]map[int]bool{}}
	for _, op := range schema.Operations() {
		x.ops[op.ID] = op
	}
	x.procs = append(x.procs, startInboxd(t, bin, "--db", dbURL, "--data-dir", t.TempDir(), "--test-controls", "--seed", seed))
	x.procs = append(x.procs, startInboxd(t, bin, "--db", dbURL, "--data-dir", t.TempDir(), "--test-controls"))
	defer func() {
		if t.Failed() {
			t.Logf("process a:\n%s\nprocess b:\n%s", x.procs[0].logText(), x.procs[1].logText())
		}
	}()
	hooks := make(chan string, 100) // the Message-IDs of the email.received events posted
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev receivedEvent
		if json.NewDecoder(r.Body).Decode(&ev) == nil && ev.Type == "email.received" {
			hooks <- ev.Message.MessageID
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	const alt = "alt@inboxd.test"
	in := []string{alt}

	// Inboxes.
	x.do("createInbox", nil, "", map[string]any{"username": "alt"}, nil)
	x.do("getInbox", in, "", nil, nil)
	var inboxes struct{ Inboxes []struct{ InboxID string } }
	x.do("listInboxes", nil, "", nil, &inboxes)
	c.Assert(fmt.Sprint(inboxes.Inboxes), qt.Contains, alt)
	x.do("updateInbox", in, "", map[string]any{"group": "team"}, nil)
	var inbox struct{ Group string }
	x.do("getInbox", in, "", nil, &inbox)
	c.Assert(inbox.Group, qt.Equals, "team")
	x.do("finishInboxSetup", in, "", map[string]any{}, nil)
	var usage struct{ Inboxes struct{ Count int } }
	x.do("getUsage", nil, "", nil, &usage)
	c.Assert(usage.Inboxes.Count, qt.Equals, 3)

	// Webhooks.
	var wh struct{ WebhookID string }
	x.do("createWebhook", nil, "", map[string]any{"url": hook.URL + "/hook", "eventTypes": []string{"email.received"}, "inboxIds": in}, &wh)
	x.do("getWebhook", []string{wh.WebhookID}, "", nil, nil)
	x.do("updateWebhook", []string{wh.WebhookID}, "", map[string]any{"description": "alternating"}, nil)
	var hooksList struct {
		Webhooks []struct{ WebhookID, Description string }
	}
	x.do("listWebhooks", nil, "", nil, &hooksList)
	c.Assert(hooksList.Webhooks, qt.HasLen, 1)
	c.Assert(hooksList.Webhooks[0].Description, qt.Equals, "alternating")

	// Sends, idempotency and the outbox.
	send := map[string]any{"to": []string{"sink@inboxd.test"}, "subject": "Quince report", "text": "quince", "idempotencyKey": "q1"}
	var sent, again struct {
		MessageID    string
		Deduplicated bool
	}
	x.do("send", in, "", send, &sent)
	x.do("getMessage", []string{alt, sent.MessageID}, "", nil, nil)
	x.do("send", in, "", send, &again)
	c.Assert(again.MessageID, qt.Equals, sent.MessageID)
	c.Assert(again.Deduplicated, qt.IsTrue)
	var outbox struct{ Messages []struct{ MessageID string } }
	x.do("listOutbox", nil, "inboxId="+url.QueryEscape(alt), nil, &outbox)
	c.Assert(outbox.Messages, qt.HasLen, 1)
	c.Assert(outbox.Messages[0].MessageID, qt.Equals, sent.MessageID)
	x.do("clearOutbox", nil, "", nil, nil)
	x.do("listOutbox", nil, "", nil, &outbox)
	c.Assert(outbox.Messages, qt.HasLen, 0)

	// Incoming mail, search, attachments, replies, threads and labels.
	var got struct{ MessageID, ThreadID string }
	x.do("injectMessage", in, "", map[string]any{"from": "ann@customer.example", "subject": "Rhubarb plan", "text": "rhubarb",
		"attachments": []map[string]any{{"filename": "plan.txt", "contentType": "text/plain", "content": base64.StdEncoding.EncodeToString([]byte("the plan"))}}}, &got)
	var found struct{ Messages []struct{ MessageID string } }
	x.do("searchMessages", in, "query=rhubarb", nil, &found)
	c.Assert(found.Messages, qt.HasLen, 1)
	c.Assert(found.Messages[0].MessageID, qt.Equals, got.MessageID)
	var msg struct {
		Attachments []struct{ AttachmentID string }
	}
	x.do("getMessage", []string{alt, got.MessageID}, "", nil, &msg)
	c.Assert(msg.Attachments, qt.HasLen, 1)
	var link struct{ DownloadURL string }
	p := x.procs[x.next] // the download link works on the other process too
	x.do("getAttachment", []string{alt, got.MessageID, msg.Attachments[0].AttachmentID}, "", nil, &link)
	c.Assert(strings.HasPrefix(link.DownloadURL, p.api), qt.IsTrue, qt.Commentf("%s", link.DownloadURL))
	status, content := call(t, x.procs[x.next].api, "", "GET", strings.TrimPrefix(link.DownloadURL, p.api), nil)
	c.Assert(status, qt.Equals, 200)
	c.Assert(string(content), qt.Equals, "the plan")
	var reply struct{ MessageID string }
	x.do("reply", []string{alt, got.MessageID}, "", map[string]any{"text": "On it", "idempotencyKey": "r1"}, &reply)
	var thread struct{ Messages []struct{ MessageID string } }
	x.do("getThread", []string{alt, got.ThreadID}, "", nil, &thread)
	c.Assert(thread.Messages, qt.HasLen, 2)
	c.Assert(thread.Messages[1].MessageID, qt.Equals, reply.MessageID)
	var threads struct{ Threads []struct{ ThreadID string } }
	x.do("listThreads", in, "", nil, &threads)
	c.Assert(fmt.Sprint(threads.Threads), qt.Contains, got.ThreadID)
	x.do("updateMessageLabels", []string{alt, got.MessageID}, "", map[string]any{"addLabels": []string{"starred"}}, nil)
	var list struct{ Messages []struct{ MessageID string } }
	x.do("listMessages", in, "labels=starred", nil, &list)
	c.Assert(list.Messages, qt.HasLen, 1)
	c.Assert(list.Messages[0].MessageID, qt.Equals, got.MessageID)
	x.do("updateThreadLabels", []string{alt, got.ThreadID}, "", map[string]any{"addLabels": []string{"project"}}, nil)
	x.do("listMessages", in, "labels=project", nil, &list)
	c.Assert(list.Messages, qt.HasLen, 2)
	var deliveries struct{ Deliveries []struct{ Type string } }
	x.do("listWebhookDeliveries", []string{wh.WebhookID}, "", nil, &deliveries)
	c.Assert(deliveries.Deliveries, qt.HasLen, 1)
	waitHook(t, hooks, got.MessageID)

	// Events: a stream and a wait on one process see mail injected on the other.
	streamSeesInjection(x)
	waitSeesInjection(x)

	// Keys and the account.
	var key struct{ KeyID, Key string }
	x.do("createTestKey", nil, "", map[string]any{"accountId": "crash", "scopes": []string{"inboxes:read"}}, &key)
	x.call(key.Key, "listInboxes", nil, "", nil, 200, nil)
	x.do("revokeTestKey", []string{key.KeyID}, "", nil, nil)
	x.eventually(key.Key, "listInboxes", nil, 401)
	x.do("disableAccount", []string{"crash"}, "", nil, nil)
	x.eventually(crashKey, "getInbox", in, 403)
	x.do("enableAccount", []string{"crash"}, "", nil, nil)
	x.eventually(crashKey, "getInbox", in, 200)

	// The test controls' fault rules and clock (postgres_controls_test.go tests them further).
	var rules struct{ Rules []any }
	x.do("setFaults", nil, "", map[string]any{"rules": []map[string]any{{"target": "api", "match": map[string]any{"operation": "getUsage"},
		"effect": map[string]any{"delayMs": 1}}}}, nil)
	x.do("getFaults", nil, "", nil, &rules)
	c.Assert(rules.Rules, qt.HasLen, 1)
	x.do("clearFaults", nil, "", nil, &rules)
	c.Assert(rules.Rules, qt.HasLen, 0)
	x.do("getFaults", nil, "", nil, &rules)
	c.Assert(rules.Rules, qt.HasLen, 0)
	var clock struct{ Now time.Time }
	x.do("advanceClock", nil, "", map[string]any{"advanceSeconds": 3600}, nil)
	x.do("getClock", nil, "", nil, &clock)
	c.Assert(time.Until(clock.Now) > 59*time.Minute, qt.IsTrue, qt.Commentf("%v", clock.Now))

	// Deletions, then back to the start.
	x.do("deleteWebhook", []string{wh.WebhookID}, "", nil, nil)
	x.call(crashKey, "getWebhook", []string{wh.WebhookID}, "", nil, 404, nil)
	var purged struct{ Deleted int }
	x.do("purgeMessages", in, "", nil, &purged)
	c.Assert(purged.Deleted, qt.Equals, 3)
	x.do("listMessages", in, "", nil, &list)
	c.Assert(list.Messages, qt.HasLen, 0)
	x.do("deleteInbox", in, "", nil, nil)
	x.call(crashKey, "getInbox", in, "", nil, 410, nil)
	x.call("", "injectMessage", in, "", map[string]any{"from": "ann@customer.example", "text": "late"}, 410, nil)
	x.do("resetServer", nil, "", nil, nil)
	x.do("listInboxes", nil, "", nil, &inboxes)
	c.Assert(fmt.Sprint(inboxes.Inboxes), qt.Not(qt.Contains), alt)
	x.do("listWebhooks", nil, "", nil, &hooksList)
	c.Assert(hooksList.Webhooks, qt.HasLen, 0)
	x.do("getUsage", nil, "", nil, &usage)
	c.Assert(usage.Inboxes.Count, qt.Equals, 2)

	x.coverage()
}

// waitHook waits until the webhook receiver got messageID.
func waitHook(t *testing.T, hooks <-chan string, messageID string) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case id := <-hooks:
			if id == messageID {
				return
			}
		case <-timeout:
			t.Fatalf("the webhook never got %s", messageID)
		}
	}
}

// streamSeesInjection opens the event stream on the process whose turn it is and
// injects mail on the other: the stream carries it within 1 s (2 s here).
func streamSeesInjection(x *alternator) {
	x.t.Helper()
	p, _ := x.turn("streamEvents")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := apiRequest(p.api, crashKey, "GET", x.path(x.ops["streamEvents"], nil, "types=email.received"), nil)
	qt.Assert(x.t, err, qt.IsNil)
	res, err := x.client.Do(req.WithContext(ctx))
	qt.Assert(x.t, err, qt.IsNil)
	defer res.Body.Close()
	qt.Assert(x.t, res.StatusCode, qt.Equals, 200)
	ids := make(chan string, 10)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			var ev receivedEvent
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
				ids <- ev.Message.MessageID
			}
		}
	})
	var got struct{ MessageID string }
	x.do("injectMessage", []string{"sink@inboxd.test"}, "", map[string]any{"from": "ann@customer.example", "subject": "streamed"}, &got)
	injected := time.Now()
	for {
		select {
		case id := <-ids:
			if id == got.MessageID {
				qt.Check(x.t, time.Since(injected) < 2*time.Second, qt.IsTrue, qt.Commentf("streamed %s after", time.Since(injected)))
				return
			}
		case <-ctx.Done():
			x.t.Fatalf("the stream never carried %s", got.MessageID)
		}
	}
}

// waitSeesInjection waits for mail on the process whose turn it is and injects it on the
// other: the wait ends within 1 s (2 s here).
func waitSeesInjection(x *alternator) {
	x.t.Helper()
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	type answer struct {
		apiAnswer
		took time.Time
	}
	waited := make(chan answer, 1)
	p, _ := x.turn("waitForMessages")
	path := x.path(x.ops["waitForMessages"], []string{"sink@inboxd.test"}, "timeout=10&query=subject:awaited&since="+since)
	go func() {
		a := request(x.client, p, "GET", path, nil)
		waited <- answer{a, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond) // the wait is under way
	var got struct{ MessageID string }
	x.do("injectMessage", []string{"sink@inboxd.test"}, "", map[string]any{"from": "ann@customer.example", "subject": "awaited"}, &got)
	injected := time.Now()
	a := <-waited
	qt.Assert(x.t, a.err, qt.IsNil)
	qt.Assert(x.t, a.status, qt.Equals, 200, qt.Commentf("%s", a.body))
	var out struct{ Messages []struct{ MessageID string } }
	qt.Assert(x.t, json.Unmarshal(a.body, &out), qt.IsNil)
	qt.Assert(x.t, out.Messages, qt.HasLen, 1)
	qt.Assert(x.t, out.Messages[0].MessageID, qt.Equals, got.MessageID)
	qt.Check(x.t, a.took.Sub(injected) < 2*time.Second, qt.IsTrue, qt.Commentf("the wait ended %s after", a.took.Sub(injected)))
}
