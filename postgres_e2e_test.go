package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/smtp"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db/postgres/pgtest"
)

// Two inboxd processes on one PostgreSQL database answer alike (extensions section 9):
// mail sent through one is listed, read and found by search on the other at once, and an
// inbox created on one is there on the other.
func TestTwoProcessesOnPostgres(t *testing.T) {
	t.Parallel()
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

// startOnPostgres starts a process on the database at url (seeded when seeds are given),
// with an SMTP listener when smtp is set.
func startOnPostgres(t *testing.T, url string, smtp bool, seeds ...string) *faultServer {
	t.Helper()
	m := &Main{DBPath: url, DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", DNS: "off", Seeds: seeds}
	if smtp {
		m.SMTPAddr = "127.0.0.1:0"
	}
	qt.Assert(t, m.Run(context.Background()), qt.IsNil)
	t.Cleanup(func() { m.Close() })
	return &faultServer{t: t, m: m, base: "http://" + m.Addr()}
}

// Mail received over SMTP by one process ends a wait on another at once, and is read and
// found by search there.
func TestSMTPToOneProcessReadOnAnotherOnPostgres(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	url := pgtest.NewDatabase(t)
	a := startOnPostgres(t, url, true, writeFixture(t, t.TempDir()))
	b := startOnPostgres(t, url, false)
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	type answer struct {
		status int
		body   []byte
		took   time.Duration
	}
	waited := make(chan answer, 1)
	go func() {
		start := time.Now()
		status, body := b.do("GET", "/v1/inboxes/sink%40inboxd.test/messages/wait?since="+since+"&query=subject:parsnip", nil)
		waited <- answer{status, body, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond) // the wait is under way on b
	msg := "From: Ann <ann@customer.example>\r\nTo: sink@inboxd.test\r\nSubject: Parsnip season\r\nMessage-ID: <parsnip-1@customer.example>\r\n\r\nHello!\r\n"
	sent := time.Now()
	c.Assert(smtp.SendMail(a.m.SMTPAddrListening(), nil, "ann@customer.example", []string{"sink@inboxd.test"}, []byte(msg)), qt.IsNil)
	got := <-waited
	c.Assert(got.status, qt.Equals, 200, qt.Commentf("%s", got.body))
	c.Assert(string(got.body), qt.Contains, "<parsnip-1@customer.example>")
	c.Assert(time.Since(sent) < 2*time.Second, qt.IsTrue, qt.Commentf("the wait on b ended %v after the mail reached a", time.Since(sent)))

	status, body := b.do("GET", messageURL("sink@inboxd.test", "<parsnip-1@customer.example>"), nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	status, body = b.do("GET", "/v1/inboxes/sink%40inboxd.test/messages/search?query=parsnip", nil)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	c.Assert(string(body), qt.Contains, "Parsnip season")
}

// When the database drops every connection under load (a restart, a failover), each
// request is answered either as usual or 503 unavailable, transient, never 500; every
// send that was answered 200 is stored; and both processes serve again at once.
func TestDroppedConnectionsUnderLoadOnPostgres(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	url := pgtest.NewDatabase(t)
	procs := []*faultServer{startOnPostgres(t, url, false, writeFixture(t, t.TempDir()))}
	procs = append(procs, startOnPostgres(t, url, false))

	var mu sync.Mutex
	var acked []string
	refused := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("load-%d-%d", w, i)
				status, body := procs[i%2].do("POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
					"to": []string{"sink@inboxd.test"}, "subject": key, "text": "hi", "idempotencyKey": key})
				switch status {
				case 200:
					var sent struct{ MessageID string }
					if json.Unmarshal(body, &sent) == nil {
						mu.Lock()
						acked = append(acked, sent.MessageID)
						mu.Unlock()
					}
				case 503:
					unavailable(t, status, body)
					mu.Lock()
					refused++
					mu.Unlock()
				default:
					t.Errorf("send answered %d: %s", status, body)
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	admin, err := pgx.Connect(context.Background(), url)
	c.Assert(err, qt.IsNil)
	defer admin.Close(context.Background())
	for range 3 {
		_, err = admin.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
		c.Assert(err, qt.IsNil)
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	c.Assert(len(acked) > 0, qt.IsTrue)
	t.Logf("%d sends answered 200, %d answered 503 while the connections dropped", len(acked), refused)
	for i, id := range acked {
		status, body := procs[(i+1)%2].do("GET", messageURL("agent@inboxd.test", id), nil)
		c.Assert(status, qt.Equals, 200, qt.Commentf("acknowledged send %s: %s", id, body))
	}
	for _, p := range procs {
		status, body := p.do("POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
			"to": []string{"sink@inboxd.test"}, "subject": "after", "text": "hi", "idempotencyKey": "after-" + p.base})
		c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	}
}
