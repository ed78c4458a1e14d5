package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/server"
)

// streamEnv is an env whose streams send keep-alives and check their key often, so
// tests see both quickly.
func streamEnv(t *testing.T, opts serverOptions) *env {
	opts.api = func(c *server.Config) {
		c.Streams.KeepAlive = 100 * time.Millisecond
		c.Streams.Reauth = 100 * time.Millisecond
	}
	return newEnvWith(t, opts)
}

// mailTo delivers a received message with the given Message-ID and subject.
func (e *env) mailTo(addr, id, subject string) {
	e.t.Helper()
	e.deliver(addr, db.NewMessage{MessageID: id, From: "ann@far.test", To: []string{addr}, Subject: subject, Text: "text of " + subject})
}

// payload decodes an event's data, checking it against the published schema.
func (e *env) payload(ev sseEvent) map[string]any {
	e.t.Helper()
	qt.Assert(e.t, e.schema.Response("streamEvents", []byte(ev.data)), qt.IsNil, qt.Commentf("%s", ev.data))
	var p map[string]any
	qt.Assert(e.t, json.Unmarshal([]byte(ev.data), &p), qt.IsNil)
	return p
}

func messageIDOf(p map[string]any) string { return p["message"].(map[string]any)["messageId"].(string) }

func TestEventStreamCarriesDeliveredMail(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	s := e.openStream(e.readOnly, "")
	e.mailTo(in, "<a@far.test>", "hello")
	ev := s.next()
	c := qt.New(t)
	c.Assert(ev.typ, qt.Equals, db.EventReceived)
	_, err := strconv.ParseInt(ev.id, 10, 64)
	c.Assert(err, qt.IsNil, qt.Commentf("id %q", ev.id))
	p := e.payload(ev)
	c.Assert(p["type"], qt.Equals, db.EventReceived)
	c.Assert(p["inboxId"], qt.Equals, in)
	c.Assert(messageIDOf(p), qt.Equals, "<a@far.test>")
	c.Assert(p["message"].(map[string]any)["text"], qt.Equals, "text of hello")

	// A label change through the API is the next event, with a greater id.
	e.ok("updateMessageLabels", "PATCH", msgPath(in, "<a@far.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	ev2 := s.next()
	c.Assert(ev2.typ, qt.Equals, db.EventLabelsUpdated)
	n1, _ := strconv.ParseInt(ev.id, 10, 64)
	n2, _ := strconv.ParseInt(ev2.id, 10, 64)
	c.Assert(n2 > n1, qt.IsTrue)
	c.Assert(e.payload(ev2)["message"].(map[string]any)["labels"], qt.DeepEquals, []any{"received", "unread", "vip"})
}

// The message of an email.received payload is getMessage's answer for it without html,
// plus bodyTruncated and bodiesOmitted (extensions section 1), whether the server renders
// it from what it stored or reads it back.
func TestEventPayloadIsGetMessagesView(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	s := e.openStream(e.full, "")
	e.deliver(in, db.NewMessage{MessageID: "<rich@far.test>", From: "Ann <ann@far.test>", To: []string{in},
		Cc: []string{"cat@far.test"}, ReplyTo: []string{"desk@far.test"}, Subject: "caf\u00e9 <b>&</b>",
		Text: "text \u2014 <quoted>", HTML: "<p>text</p>", Labels: []string{"vip"},
		Timestamp: time.Now().Add(-time.Minute).Add(777 * time.Microsecond), InReplyTo: "<x@far.test>",
		Protection: &db.Protection{Status: "clean", ScannedAt: "2026-11-01T00:00:00.000Z",
			Authentication: db.Authentication{SPF: "pass", DKIM: "pass", DMARC: "pass", SigningDomains: []string{"far.test"}},
			Spam:           db.Spam{Score: 0.5, Threshold: 6}, Antivirus: db.Antivirus{Status: "clean", Signatures: []string{}}, Reasons: []string{}},
		Triage: complete("personal", ptr(true), ptr("high"))})
	e.mailTo(in, "<plain@far.test>", "plain")
	for _, id := range []string{"<rich@far.test>", "<plain@far.test>"} {
		got := e.payload(s.next())["message"].(map[string]any)
		qt.Assert(t, got["messageId"], qt.Equals, id)
		qt.Assert(t, got["bodyTruncated"], qt.Equals, false)
		qt.Assert(t, got["bodiesOmitted"], qt.Equals, false)
		delete(got, "bodyTruncated")
		delete(got, "bodiesOmitted")
		want := e.ok("getMessage", "GET", msgPath(in, id), e.full, nil)
		delete(want, "html")
		qt.Assert(t, got, qt.DeepEquals, want)
	}
}

func TestEventStreamStartsAtTheEnd(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	e.mailTo(in, "<old@far.test>", "old")
	s := e.openStream(e.full, "")
	e.mailTo(in, "<new@far.test>", "new")
	qt.Assert(t, messageIDOf(e.payload(s.next())), qt.Equals, "<new@far.test>")
}

// A reader that resumes while mail keeps arriving gets every event once, in order.
func TestEventStreamResumesWithoutGapsOrRepeats(t *testing.T) {
	for _, how := range []string{"header", "query"} {
		t.Run(how, func(t *testing.T) {
			e := streamEnv(t, serverOptions{})
			in := e.createInbox("desk")
			first := e.openStream(e.full, "")
			var sent []string
			for i := 0; i < 3; i++ {
				sent = append(sent, fmt.Sprintf("<m%d@far.test>", i))
				e.mailTo(in, sent[i], "m")
			}
			var got []string
			var lastID string
			for i := 0; i < 2; i++ {
				ev := first.next()
				got, lastID = append(got, messageIDOf(e.payload(ev))), ev.id
			}
			first.close()
			done := make(chan struct{})
			go func() { // mail keeps arriving while the reader comes back
				defer close(done)
				for i := 3; i < 20; i++ {
					e.mailTo(in, fmt.Sprintf("<m%d@far.test>", i), "m")
				}
			}()
			var again *sseStream
			if how == "header" {
				again = e.openStream(e.full, "", "Last-Event-ID", lastID)
			} else {
				again = e.openStream(e.full, "?lastEventId="+lastID)
			}
			<-done
			for i := 3; i < 20; i++ {
				sent = append(sent, fmt.Sprintf("<m%d@far.test>", i))
			}
			prev, _ := strconv.ParseInt(lastID, 10, 64)
			for len(got) < len(sent) {
				ev := again.next()
				n, _ := strconv.ParseInt(ev.id, 10, 64)
				qt.Assert(t, n > prev, qt.IsTrue, qt.Commentf("ids increase: %d after %d", n, prev))
				prev = n
				got = append(got, messageIDOf(e.payload(ev)))
			}
			qt.Assert(t, got, qt.DeepEquals, sent)
			again.quiet(200 * time.Millisecond)
		})
	}
}

func TestEventStreamFilters(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	a, b := e.createInbox("alpha"), e.createInbox("beta")
	s := e.openStream(e.full, "?inboxId="+url.QueryEscape(a)+"&types=email.received")
	both := e.openStream(e.full, "?inboxId="+url.QueryEscape(a)+"&inboxId="+url.QueryEscape(b))
	e.mailTo(b, "<b@far.test>", "to beta")
	e.mailTo(a, "<a1@far.test>", "to alpha")
	e.ok("updateMessageLabels", "PATCH", msgPath(a, "<a1@far.test>")+"/labels", e.full, map[string]any{"addLabels": []string{"vip"}})
	e.mailTo(a, "<a2@far.test>", "to alpha again")
	c := qt.New(t)
	c.Assert(messageIDOf(e.payload(s.next())), qt.Equals, "<a1@far.test>")
	c.Assert(messageIDOf(e.payload(s.next())), qt.Equals, "<a2@far.test>")
	var types []string
	for i := 0; i < 4; i++ {
		types = append(types, both.next().typ)
	}
	c.Assert(types, qt.DeepEquals, []string{db.EventReceived, db.EventReceived, db.EventLabelsUpdated, db.EventReceived})
	// Another account's mail never shows.
	theirs := e.ok("createInbox", "POST", "/v1/inboxes", e.other, map[string]any{"username": "theirs"})["inboxId"].(string)
	in, err := e.store.InboxByAddress(context.Background(), "other", theirs)
	c.Assert(err, qt.IsNil)
	_, err = db.Deliver(context.Background(), e.store, []db.NewMessage{{InboxID: in.ID, MessageID: "<o@far.test>", Direction: db.Received,
		From: "x@far.test", To: []string{theirs}, Subject: "x", Text: "x", Timestamp: time.Now(), Labels: db.InitialLabels(db.Received, false, nil)}})
	c.Assert(err, qt.IsNil)
	both.quiet(200 * time.Millisecond)
}

func TestEventStreamRefusesBadRequestsBeforeStarting(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := streamEnv(t, serverOptions{now: clock})
	in := e.createInbox("desk")
	forever := db.GenerateAccountToken() // the clock moves past the env's keys
	qt.Assert(t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: "acme", Token: forever, Scopes: db.AllScopes()}), qt.IsNil)
	e.fails(404, "not_found", "GET", "/v1/events?inboxId=nobody%40inboxd.test", e.full, nil)
	r := e.fails(422, "invalid_argument", "GET", "/v1/events?types=email.nope", e.full, nil)
	qt.Assert(t, string(r.body), qt.Contains, "types")
	e.fails(422, "invalid_argument", "GET", "/v1/events?lastEventId=abc", e.full, nil)
	r = e.fails(422, "invalid_argument", "GET", "/v1/events", e.full, nil, "Last-Event-ID", "x1")
	qt.Assert(t, string(r.body), qt.Contains, "Last-Event-ID")
	e.fails(422, "invalid_argument", "GET", "/v1/events?lastEventId=999999", e.full, nil)
	e.fails(422, "invalid_argument", "GET", "/v1/events?since=1", e.full, nil)

	// Retention drops the first events: resuming before them is 410, after them works.
	e.mailTo(in, "<old@far.test>", "old")
	mu.Lock()
	now = now.Add(db.EventRetention + time.Hour)
	mu.Unlock()
	e.deliver(in, db.NewMessage{MessageID: "<new@far.test>", From: "ann@far.test", To: []string{in}, Subject: "new", Text: "new", Timestamp: clock()})
	_, err := e.store.TrimEvents(context.Background(), clock().Add(-db.EventRetention))
	qt.Assert(t, err, qt.IsNil)
	last, expired, err := e.store.EventBounds(context.Background())
	qt.Assert(t, err, qt.IsNil)
	r = e.fails(410, "cursor_expired", "GET", "/v1/events?lastEventId=0", forever, nil)
	qt.Assert(t, r.header.Get("Content-Type"), qt.Equals, "application/json")
	s := e.openStream(forever, "", "Last-Event-ID", strconv.FormatInt(expired, 10))
	qt.Assert(t, messageIDOf(e.payload(s.next())), qt.Equals, "<new@far.test>")
	qt.Assert(t, last, qt.Equals, expired+1)
}

func TestEventStreamAuthorization(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	mine, other := e.createInbox("mine"), e.createInbox("other")
	e.fails(401, "unauthorized", "GET", "/v1/events", "", nil)
	e.fails(403, "forbidden", "GET", "/v1/events", e.newKey("acme", db.ScopeInboxesRead, db.ScopeMessagesWrite), nil)
	e.fails(404, "not_found", "GET", "/v1/events?inboxId="+url.QueryEscape(mine), e.other, nil)
	mk := e.mailboxKey("acme", mine)
	e.fails(403, "forbidden", "GET", "/v1/events?inboxId="+url.QueryEscape(other), mk, nil)
	own := e.openStream(mk, "")
	explicit := e.openStream(mk, "?inboxId="+url.QueryEscape(mine))
	scoped := e.openStream(e.newKey("acme", db.ScopeMessagesRead), "")
	e.mailTo(other, "<o@far.test>", "not for the mailbox key")
	e.mailTo(mine, "<m@far.test>", "for the mailbox key")
	qt.Assert(t, messageIDOf(e.payload(own.next())), qt.Equals, "<m@far.test>")
	qt.Assert(t, messageIDOf(e.payload(explicit.next())), qt.Equals, "<m@far.test>")
	// An account key sees every inbox, one created after the stream started too.
	qt.Assert(t, messageIDOf(e.payload(scoped.next())), qt.Equals, "<o@far.test>")
	qt.Assert(t, messageIDOf(e.payload(scoped.next())), qt.Equals, "<m@far.test>")
	later := e.createInbox("later")
	e.mailTo(later, "<l@far.test>", "later")
	qt.Assert(t, messageIDOf(e.payload(scoped.next())), qt.Equals, "<l@far.test>")
}

func TestEventStreamEndsWhenTheKeyStops(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	mine := e.createInbox("mine")
	replaced := e.openStream(e.mailboxKey("acme", mine), "")
	still := e.openStream(e.full, "")
	soon := time.Now().Add(time.Second)
	token := db.GenerateAccountToken()
	qt.Assert(t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: "acme", Token: token, Scopes: db.AllScopes(), ExpiresAt: &soon}), qt.IsNil)
	expiring := e.openStream(token, "")
	sameKey := e.openStream(token, "?types=email.received") // streams of one key are checked together
	in, err := e.store.InboxByAddress(context.Background(), "acme", mine)
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, db.CreateKey(context.Background(), e.store, db.NewKey{AccountID: "acme", Token: db.GenerateMailboxToken(in.UUID), InboxAddress: mine, Replace: true}), qt.IsNil)
	replaced.ends()
	expiring.ends()
	sameKey.ends()
	// The other keys' streams go on.
	e.mailTo(mine, "<after@far.test>", "after")
	qt.Assert(t, messageIDOf(e.payload(still.next())), qt.Equals, "<after@far.test>")
}

func TestEventStreamKeepAliveAndMetrics(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	s := e.openStream(e.full, "")
	qt.Assert(t, s.comment(), qt.Equals, "keep-alive")
	r := e.do("GET", "/metrics", "", nil)
	qt.Assert(t, string(r.body), qt.Contains, "inboxd_event_streams 1\n")
	s.close()
	e.eventually("the stream counted closed", func() bool {
		return strings.Contains(string(e.do("GET", "/metrics", "", nil).body), "inboxd_event_streams 0\n")
	})
}

// Shutting down ends the streams and answers the waits, so draining does not wait for
// them.
func TestEndStreamsEndsStreamsAndAnswersWaits(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	s := e.openStream(e.full, "")
	ch := e.startWait(e.readOnly, waitPath(in, time.Now(), "&timeout=60"))
	e.eventually("the wait to start", func() bool { return e.waiting(1) })
	e.api.EndStreams()
	s.ends()
	m := answered(t, ch)
	qt.Assert(t, m["timedOut"], qt.Equals, true)
}

// Each scope alone: only messages:read streams and waits.
func TestStreamAndWaitNeedMessagesRead(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	in := e.createInbox("desk")
	wait := waitPath(in, time.Now(), "&timeout=1")
	for _, scope := range db.AllScopes() {
		key := e.newKey("acme", scope)
		if scope != db.ScopeMessagesRead {
			e.fails(403, "forbidden", "GET", "/v1/events", key, nil)
			e.fails(403, "forbidden", "GET", wait, key, nil)
			continue
		}
		e.openStream(key, "").close()
		e.ok("waitForMessages", "GET", wait, key, nil)
	}
	for _, key := range []string{"", db.GenerateAccountToken()} {
		e.fails(401, "unauthorized", "GET", "/v1/events", key, nil)
		e.fails(401, "unauthorized", "GET", wait, key, nil)
	}
}

// An email.delivery_updated event occurred when its delivery record changed, as the
// hosted service has it: occurredAt is delivery.updatedAt, even when the record was
// stamped a moment before the commit that records it (a clock here that moves on at every
// reading).
func TestDeliveryEventOccurredWhenItsRecordChanged(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	ticking := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	e := streamEnv(t, serverOptions{now: ticking})
	in := e.createInbox("desk")
	s := e.openStream(e.full, "?types=email.delivery_updated")
	e.ok("send", "POST", inboxPath(in)+"/messages/send", e.full, map[string]any{"to": []string{"ann@far.example"},
		"subject": "s", "text": "t", "idempotencyKey": "k1"})
	for range 2 { // queued, then delivered
		p := e.payload(s.next())
		qt.Assert(t, p["occurredAt"], qt.Equals, p["delivery"].(map[string]any)["updatedAt"], qt.Commentf("%v", p))
	}
}

// A cursor that is not a number is refused in words that name the parameter and say
// what it must be.
func TestEventStreamNamesABadCursor(t *testing.T) {
	e := streamEnv(t, serverOptions{})
	r := e.fails(422, "invalid_argument", "GET", "/v1/events?lastEventId=abc", e.full, nil)
	qt.Assert(t, r.json(t)["error"].(map[string]any)["message"], qt.Equals, "lastEventId: must be the id of an event this stream sent (the Last-Event-ID header does the same and wins)")
}
