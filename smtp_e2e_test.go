package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/db/sqlite"
)

// proc is a running inboxd.
type proc struct {
	cmd  *exec.Cmd
	api  string
	smtp string
	log  *bytes.Buffer // read it through logText while the process runs
	logw *lockedWriter
}

// logText is what the process has logged so far.
func (p *proc) logText() string {
	p.logw.mu.Lock()
	defer p.logw.mu.Unlock()
	return p.log.String()
}

var (
	apiRE  = regexp.MustCompile(`listening on (\S+) \(API base`)
	smtpRE = regexp.MustCompile(`SMTP listening on (\S+)`)
)

func startInboxd(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	// --dns off: the test must not depend on the machine's resolver (SPF lookups).
	cmd := exec.Command(bin, append([]string{"serve", "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0", "--domain", "inboxd.test",
		"--dns", "off"}, args...)...)
	p := &proc{cmd: cmd, log: &bytes.Buffer{}}
	p.logw = &lockedWriter{w: p.log}
	cmd.Stderr = p.logw
	out, err := cmd.StdoutPipe()
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, cmd.Start(), qt.IsNil)
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := apiRE.FindStringSubmatch(sc.Text()); m != nil {
				p.api = "http://" + m[1]
			}
			if m := smtpRE.FindStringSubmatch(sc.Text()); m != nil {
				p.smtp = m[1]
				close(ready)
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("inboxd did not start: %s", p.log)
	}
	return p
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	qt.Assert(t, p.cmd.Process.Kill(), qt.IsNil) // SIGKILL: no shutdown code runs
	p.cmd.Wait()
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

const crashKey = "bze_crashtest-0000-0000-full-access-key-0001"

func writeFixture(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fixture.json")
	fixture := `{"accounts": [{"id": "crash", "plan": "exempt",
		"keys": [{"token": "` + crashKey + `", "scopes": ["inboxes:read", "inboxes:write", "messages:read", "messages:send", "messages:write"]}],
		"inboxes": [{"address": "sink@{domain}"}, {"address": "agent@{domain}"}]}]}`
	qt.Assert(t, os.WriteFile(path, []byte(fixture), 0o644), qt.IsNil)
	return path
}

// TestKillDuringSMTPKeepsAcknowledgedMail kills the server with SIGKILL in the middle of a
// stream of SMTP deliveries over several connections: every message that got its 250 is
// in the database afterwards.
func TestKillDuringSMTPKeepsAcknowledgedMail(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	bin := inboxdBinary(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "inboxd.db")
	p := startInboxd(t, bin, "--db", dbPath, "--seed", writeFixture(t, dir))

	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := smtp.Dial(p.smtp)
			if err != nil {
				return
			}
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("<crash-%d-%d@customer.example>", w, i)
				msg := "From: ann@customer.example\r\nTo: sink@inboxd.test\r\nSubject: crash " + id + "\r\nMessage-ID: " + id + "\r\n\r\n" +
					strings.Repeat("A line of text to make the message a realistic size.\r\n", 30)
				if err := cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg)); err != nil {
					return // the server is gone: this message was not acknowledged
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		}()
	}
	// Let some messages through, then pull the plug mid-stream.
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 150 || (n > 0 && time.Now().After(deadline)) || time.Now().After(deadline.Add(10*time.Second)) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.kill(t)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	c.Assert(len(acked) > 0, qt.IsTrue, qt.Commentf("no message was acknowledged: %s", p.log))

	store, err := sqlite.Open(context.Background(), dbPath, sqlite.Options{})
	c.Assert(err, qt.IsNil)
	defer store.Close()
	inbox, err := store.LocalInbox(context.Background(), "sink@inboxd.test")
	c.Assert(err, qt.IsNil)
	missing := 0
	for _, id := range acked {
		if _, err := store.GetMessage(context.Background(), inbox.ID, id); err != nil {
			missing++
			t.Errorf("acknowledged %s is not stored: %v", id, err)
		}
	}
	c.Assert(missing, qt.Equals, 0)
	t.Logf("%d acknowledged messages, all stored after SIGKILL", len(acked))
}

// stallRelay is a relay that, once it has received `after` messages, stops answering:
// the message that reached the limit (and any other that completes) is kept but not
// acknowledged, and new transactions hang. That is the moment the test kills inboxd.
type stallRelay struct {
	mu      sync.Mutex
	after   int
	stalled bool
	stall   chan struct{} // closed when the stall begins
	release chan struct{} // closed to answer normally again
	count   map[string]int
}

func (r *stallRelay) NewSession(*smtp.Conn) (smtp.Session, error) { return &stallSession{r: r}, nil }

func (r *stallRelay) wait() {
	r.mu.Lock()
	stalled := r.stalled
	r.mu.Unlock()
	if stalled {
		<-r.release
	}
}

type stallSession struct{ r *stallRelay }

func (s *stallSession) Reset()        {}
func (s *stallSession) Logout() error { return nil }
func (s *stallSession) Mail(string, *smtp.MailOptions) error {
	s.r.wait()
	return nil
}
func (s *stallSession) Rcpt(string, *smtp.RcptOptions) error {
	s.r.wait()
	return nil
}

var messageIDRE = regexp.MustCompile(`(?m)^Message-ID: (<[^>]+>)`)

func (s *stallSession) Data(rd io.Reader) error {
	b, err := io.ReadAll(rd)
	if err != nil {
		return err // an unfinished transaction is dropped, as RFC 5321 wants
	}
	id := ""
	if m := messageIDRE.FindSubmatch(b); m != nil {
		id = string(m[1])
	}
	r := s.r
	r.mu.Lock()
	r.count[id]++ // the relay has the message from here on
	if !r.stalled && len(r.count) >= r.after {
		r.stalled = true
		close(r.stall)
	}
	stalled := r.stalled
	r.mu.Unlock()
	if stalled {
		<-r.release
	}
	return nil
}

// TestKillMidRelaySendsEachMessageOnce kills the server while relay deliveries are in
// flight (one handed off and waiting for the relay's answer, others mid-transaction) and
// restarts it: every message reaches the relay exactly once, and the record of the one
// whose answer was lost says so.
func TestKillMidRelaySendsEachMessageOnce(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	bin := inboxdBinary(t)
	relay := &stallRelay{after: 5, stall: make(chan struct{}), release: make(chan struct{}), count: map[string]int{}}
	rs := smtp.NewServer(relay)
	rs.Domain = "relay.test"
	rs.ErrorLog = nopLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, qt.IsNil)
	go rs.Serve(ln)
	defer rs.Close()
	defer func() {
		select {
		case <-relay.release:
		default:
			close(relay.release)
		}
	}()

	dir := t.TempDir()
	dbPath := filepath.Join(dir, "inboxd.db")
	args := []string{"--db", dbPath, "--seed", writeFixture(t, dir), "--relay", "smtp://" + ln.Addr().String()}
	p := startInboxd(t, bin, args...)
	const n = 20
	ids := make([]string, n)
	for i := range n {
		var res struct {
			MessageID string `json:"messageId"`
		}
		status := api(t, p.api, "POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
			"to": []string{fmt.Sprintf("r%d@far.example", i)}, "subject": fmt.Sprintf("Relay %d", i), "text": "Hello",
			"idempotencyKey": fmt.Sprintf("k%d", i)}, &res)
		c.Assert(status, qt.Equals, 200)
		ids[i] = res.MessageID
	}
	select {
	case <-relay.stall:
	case <-time.After(20 * time.Second):
		t.Fatalf("the relay never got %d messages: %s", relay.after, p.log)
	}
	time.Sleep(300 * time.Millisecond) // every worker is now waiting on the relay
	p.kill(t)
	close(relay.release)

	p = startInboxd(t, bin, args...)
	settled := func(r map[string]any) bool {
		return r["status"] == "delivered" || r["status"] == "accepted"
	}
	deadline := time.Now().Add(30 * time.Second)
	uncertain := 0
	for _, id := range ids {
		for {
			var m struct {
				Delivery struct {
					Recipients []map[string]any `json:"recipients"`
				} `json:"delivery"`
			}
			status := api(t, p.api, "GET", "/v1/inboxes/agent%40inboxd.test/messages/"+pathEscape(id), nil, &m)
			c.Assert(status, qt.Equals, 200)
			if r := m.Delivery.Recipients[0]; settled(r) {
				if r["status"] == "accepted" {
					uncertain++
					c.Check(r["reason"], qt.Equals, db.UncertainReason)
				}
				break
			}
			c.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("%s not delivered after the restart: %+v\n%s", id, m, p.log))
			time.Sleep(20 * time.Millisecond)
		}
	}
	relay.mu.Lock()
	defer relay.mu.Unlock()
	for _, id := range ids {
		c.Check(relay.count[id], qt.Equals, 1, qt.Commentf("message %s reached the relay %d times", id, relay.count[id]))
	}
	c.Check(len(relay.count), qt.Equals, n)
	c.Check(uncertain > 0, qt.IsTrue) // the message in hand-off when the server died
}

type nopLog struct{}

func (nopLog) Printf(string, ...any) {}
func (nopLog) Println(...any)        {}

func pathEscape(id string) string {
	r := strings.NewReplacer("<", "%3C", ">", "%3E", "@", "%40")
	return r.Replace(id)
}

func api(t *testing.T, base, method, path string, body, out any) int {
	t.Helper()
	status, b := call(t, base, crashKey, method, path, body)
	if out != nil && status == 200 {
		qt.Assert(t, json.Unmarshal(b, out), qt.IsNil)
	}
	if status != 200 {
		t.Logf("%s %s: %d %s", method, path, status, b)
	}
	return status
}

// recordingRelay is a relay that keeps what it is given.
type recordingRelay struct {
	mu  sync.Mutex
	got map[string]string // recipient -> message
}

func (r *recordingRelay) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &recordingSession{r: r}, nil
}

type recordingSession struct {
	r  *recordingRelay
	to []string
}

func (s *recordingSession) Reset()                               { s.to = nil }
func (s *recordingSession) Logout() error                        { return nil }
func (s *recordingSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *recordingSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *recordingSession) Data(rd io.Reader) error {
	b, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	for _, to := range s.to {
		s.r.got[to] = string(b)
	}
	return nil
}

// TestServeSMTPInAndRelayOut boots the whole program with the SMTP listener and a relay:
// mail delivered over SMTP is readable through the API, and mail sent through the API to
// another domain reaches the relay.
func TestServeSMTPInAndRelayOut(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	relay := &recordingRelay{got: map[string]string{}}
	rs := smtp.NewServer(relay)
	rs.ErrorLog = nopLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, qt.IsNil)
	go rs.Serve(ln)
	defer rs.Close()

	dir := t.TempDir()
	m := &Main{DBPath: filepath.Join(dir, "inboxd.db"), HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0", Domain: "inboxd.test",
		Seeds: []string{writeFixture(t, dir)}, Relay: "smtp://" + ln.Addr().String(), DNS: "off"}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	base := "http://" + m.Addr()

	cl, err := smtp.Dial(m.SMTPAddrListening())
	c.Assert(err, qt.IsNil)
	msg := "From: Ann <ann@customer.example>\r\nTo: sink@inboxd.test\r\nSubject: Over SMTP\r\nMessage-ID: <in-1@customer.example>\r\n\r\nHello!\r\n"
	c.Assert(cl.SendMail("ann@customer.example", []string{"sink@inboxd.test"}, strings.NewReader(msg)), qt.IsNil)
	cl.Quit()
	var got struct {
		Subject string   `json:"subject"`
		Labels  []string `json:"labels"`
	}
	c.Assert(api(t, base, "GET", "/v1/inboxes/sink%40inboxd.test/messages/%3Cin-1%40customer.example%3E", nil, &got), qt.Equals, 200)
	c.Assert(got.Subject, qt.Equals, "Over SMTP")

	var sent struct {
		MessageID string `json:"messageId"`
	}
	c.Assert(api(t, base, "POST", "/v1/inboxes/agent%40inboxd.test/messages/send", map[string]any{
		"to": []string{"friend@far.example"}, "subject": "Out via the relay", "text": "Hi", "idempotencyKey": "out-1"}, &sent), qt.Equals, 200)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var m struct {
			Delivery struct {
				Recipients []struct {
					Status, Provider string
				} `json:"recipients"`
			} `json:"delivery"`
		}
		c.Assert(api(t, base, "GET", "/v1/inboxes/agent%40inboxd.test/messages/"+pathEscape(sent.MessageID), nil, &m), qt.Equals, 200)
		if r := m.Delivery.Recipients[0]; r.Status == "delivered" {
			c.Assert(r.Provider, qt.Equals, "relay")
			break
		}
		c.Assert(time.Now().Before(deadline), qt.IsTrue, qt.Commentf("%+v", m))
		time.Sleep(20 * time.Millisecond)
	}
	relay.mu.Lock()
	c.Assert(relay.got["friend@far.example"], qt.Contains, "Subject: Out via the relay")
	relay.mu.Unlock()
	closed = true
	c.Assert(m.Close(), qt.IsNil)
}
