// Command soak runs inboxd under mixed, concurrent API and SMTP traffic for a bounded time
// and checks what an operator cares about over hours: no 5xx answer, no acknowledged
// message lost, and memory that stays flat once warm. It starts the binary it is given on
// a fresh database on loopback (--dns off: no resolver, nothing leaves the machine; mail to
// other domains goes to the sink), drives it, lets the queues drain, checks every
// acknowledged message and send, stops the server with SIGTERM (it must exit 0) and
// prints a report in Markdown. It exits non-zero when a check fails.
//
//	go build -tags '...' -o /tmp/inboxd . && go run ./scripts/soak -bin /tmp/inboxd -minutes 10
//
// scripts/soak.sh does exactly that.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/inboxd/inboxd/scripts/internal/benchkit"
)

const (
	key          = "bze_soak0000-0000-4000-8000-000000000001.soakTestKeyNotSecretAAAAAAAAAAAAAAAAAAAAAA"
	metricsToken = "soak-metrics-token"
	domain       = "inboxd.test"
	inbound      = 8   // inboxes that receive SMTP mail and local sends
	sendsPerBox  = 200 // under the limit of 250 sends a day per inbox
)

func main() {
	benchkit.OwnRuntime() // the environment's GOGC, GOMEMLIMIT, GOMAXPROCS are the server's
	bin := flag.String("bin", "", "inboxd binary to start (required)")
	minutes := flag.Float64("minutes", 10, "how long the traffic runs")
	apiClients := flag.Int("api-clients", 8, "concurrent API clients")
	smtpClients := flag.Int("smtp-clients", 4, "concurrent SMTP clients")
	apiRate := flag.Float64("api-rate", 60, "API requests per second, all clients together")
	smtpRate := flag.Float64("smtp-rate", 15, "SMTP messages per second, all clients together")
	keep := flag.Bool("keep", false, "keep the working directory (database, index, server log)")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "soak: -bin is required")
		os.Exit(2)
	}
	s := &soak{bin: *bin, duration: time.Duration(*minutes * float64(time.Minute)), apiClients: *apiClients,
		smtpClients: *smtpClients, apiRate: *apiRate, smtpRate: *smtpRate, keep: *keep}
	ok, err := s.run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

type soak struct {
	bin                     string
	duration                time.Duration
	apiClients, smtpClients int
	apiRate, smtpRate       float64
	keep                    bool

	dir     string
	cmd     *exec.Cmd
	base    string
	smtp    string
	http    *http.Client
	started time.Time

	mu       sync.Mutex
	stats    map[string]*opStats // by operation
	failures []string            // 5xx answers and other unexpected outcomes, the first few
	received map[string][]string // inbox -> acknowledged Message-IDs (SMTP and local sends)
	sent     map[string][]string // sender inbox -> acknowledged sent Message-IDs
	gone     map[string]bool     // inboxes deleted on purpose
	known    []msgRef            // received messages to read, label and reply to
	senders  []string            // inboxes sends go out from, each used up to sendsPerBox times
	samples  []sample

	fiveXX, transport, smtpTemp atomic.Int64
	seq, sends                  atomic.Int64
}

type msgRef struct{ inbox, id string }

type opStats struct {
	count    map[int]int // by status
	duration []time.Duration
}

type sample struct {
	at                         time.Duration
	rss, anon, file, heap      int64 // bytes
	live, goResident           int64 // bytes: the heap the last collection kept; what the Go runtime holds
	goroutines, fds            int64
	outbound, index, triageQ   int64
	requests, messagesIngested int64
}

func (s *soak) run() (bool, error) {
	var err error
	if s.dir, err = os.MkdirTemp("", "inboxd-soak-"); err != nil {
		return false, err
	}
	if s.keep {
		fmt.Fprintln(os.Stderr, "working directory:", s.dir)
	} else {
		defer os.RemoveAll(s.dir)
	}
	s.stats, s.received, s.sent, s.gone = map[string]*opStats{}, map[string][]string{}, map[string][]string{}, map[string]bool{}
	s.http = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	if err := s.start(); err != nil {
		return false, err
	}
	stopped := false
	defer func() {
		if !stopped {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	}()
	for i := range inbound {
		s.must("createInbox", "POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("in%d", i)}, nil)
	}

	// Traffic, paced by two token buckets, until the deadline.
	s.started = time.Now()
	deadline := s.started.Add(s.duration)
	apiTick, smtpTick := pacer(s.apiRate, deadline), pacer(s.smtpRate, deadline)
	var wg sync.WaitGroup
	for c := range s.apiClients {
		wg.Add(1)
		go func() { defer wg.Done(); s.apiClient(c, apiTick) }()
	}
	for c := range s.smtpClients {
		wg.Add(1)
		go func() { defer wg.Done(); s.smtpClient(c, smtpTick) }()
	}
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); s.monitor(deadline) }()
	wg.Wait()
	<-monitorDone
	traffic := time.Since(s.started)

	// Drain, then check everything acknowledged.
	drainStart := time.Now()
	if err := s.drain(2 * time.Minute); err != nil {
		return false, err
	}
	drained := time.Since(drainStart)
	lost, checked := s.verify()
	final := s.sampleNow()

	// SIGTERM: drain and exit 0.
	s.cmd.Process.Signal(syscall.SIGTERM)
	exit := make(chan error, 1)
	go func() { exit <- s.cmd.Wait() }()
	var exitErr error
	select {
	case exitErr = <-exit:
	case <-time.After(60 * time.Second):
		exitErr = errors.New("no exit within 60 s of SIGTERM")
		s.cmd.Process.Kill()
		<-exit
	}
	stopped = true
	errorLines := s.serverErrors()
	return s.report(traffic, drained, lost, checked, final, exitErr, errorLines), nil
}

var (
	listenRE = regexp.MustCompile(`listening on (\S+) \(API base`)
	smtpRE   = regexp.MustCompile(`SMTP listening on (\S+)`)
)

func (s *soak) start() error {
	fixture := filepath.Join(s.dir, "fixture.json")
	f := `{"accounts": [{"id": "soak", "plan": "exempt",
		"keys": [{"token": "` + key + `", "scopes": ["inboxes:read", "inboxes:write", "messages:read", "messages:send", "messages:write"]}]}]}`
	if err := os.WriteFile(fixture, []byte(f), 0o644); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return err
	}
	s.cmd = exec.Command(s.bin, "serve", "--db", filepath.Join(s.dir, "soak.db"), "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
		"--domain", domain, "--dns", "off", "--seed", fixture, "--metrics-token", metricsToken, "--log-format", "json")
	benchkit.DieWithParent(s.cmd)
	s.cmd.Stderr = logf
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	timer := time.AfterFunc(60*time.Second, func() { s.cmd.Process.Kill() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
			s.base = "http://" + m[1]
		}
		if m := smtpRE.FindStringSubmatch(sc.Text()); m != nil {
			s.smtp = m[1]
			break
		}
	}
	timer.Stop()
	go io.Copy(io.Discard, out)
	if s.base == "" || s.smtp == "" {
		return fmt.Errorf("inboxd did not start; see %s", logf.Name())
	}
	return nil
}

// pacer hands out tokens at rate per second until the deadline, then closes.
func pacer(rate float64, deadline time.Time) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		interval := time.Duration(float64(time.Second) / rate)
		next := time.Now()
		for time.Now().Before(deadline) {
			time.Sleep(time.Until(next))
			next = next.Add(interval)
			select {
			case ch <- struct{}{}:
			case <-time.After(time.Until(deadline)):
				return
			}
		}
	}()
	return ch
}

// call does one API request and records it under op. A 5xx answer or a broken connection
// is a failure; other statuses are the caller's business.
func (s *soak) call(op, method, path string, body, out any) (int, []byte) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	res, err := s.http.Do(req)
	var b []byte
	status := 0
	if err == nil {
		b, err = io.ReadAll(res.Body)
		res.Body.Close()
		status = res.StatusCode
	}
	d := time.Since(start)
	s.mu.Lock()
	st := s.stats[op]
	if st == nil {
		st = &opStats{count: map[int]int{}}
		s.stats[op] = st
	}
	st.count[status]++
	st.duration = append(st.duration, d)
	s.mu.Unlock()
	switch {
	case err != nil:
		s.transport.Add(1)
		s.fail("%s %s: %v", method, path, err)
	case status >= 500:
		s.fiveXX.Add(1)
		s.fail("%s %s: %d %s", method, path, status, b)
	case status == 200 && out != nil:
		if err := json.Unmarshal(b, out); err != nil {
			s.fail("%s %s: %v", method, path, err)
		}
	}
	return status, b
}

func (s *soak) must(op, method, path string, body, out any) bool {
	status, b := s.call(op, method, path, body, out)
	if status != 200 && status < 500 && status != 0 {
		s.fail("%s %s: %d %s", method, path, status, b)
	}
	return status == 200
}

func (s *soak) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) < 20 {
		s.failures = append(s.failures, fmt.Sprintf("%s: ", time.Since(s.started).Round(time.Second))+fmt.Sprintf(format, args...))
	}
}

func inboxPath(addr string) string { return "/v1/inboxes/" + url.PathEscape(addr) }

var words = strings.Fields("invoice order shipment refund outage login password report meeting contract renewal " +
	"quarterly budget schedule migration database latency dashboard feature request complaint feedback")

func (s *soak) text(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("soaktoken")
	for range n {
		b.WriteString(" " + words[rng.IntN(len(words))])
	}
	return b.String()
}

// apiClient runs a mix of API operations: sends and replies, reads, lists, searches,
// label changes, attachment links, usage, and now and then an inbox made and deleted.
func (s *soak) apiClient(c int, tick <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(c), 42))
	for range tick {
		in := fmt.Sprintf("in%d@%s", rng.IntN(inbound), domain)
		switch r := rng.IntN(100); {
		case r < 25:
			s.send(rng)
		case r < 30:
			s.reply(rng)
		case r < 45:
			s.call("listMessages", "GET", inboxPath(in)+"/messages?limit=20", nil, nil)
		case r < 55:
			if m, ok := s.pick(rng); ok {
				var msg struct {
					Attachments []struct {
						AttachmentID string `json:"attachmentId"`
					} `json:"attachments"`
				}
				if s.must("getMessage", "GET", inboxPath(m.inbox)+"/messages/"+url.PathEscape(m.id), nil, &msg) && len(msg.Attachments) > 0 {
					var link struct {
						DownloadURL string `json:"downloadUrl"`
					}
					if s.must("getAttachment", "GET", inboxPath(m.inbox)+"/messages/"+url.PathEscape(m.id)+"/attachments/"+msg.Attachments[0].AttachmentID, nil, &link) {
						s.download(link.DownloadURL)
					}
				}
			}
		case r < 65:
			q := words[rng.IntN(len(words))]
			if rng.IntN(3) == 0 {
				q = "soaktoken " + q + " -" + words[rng.IntN(len(words))]
			}
			s.call("searchMessages", "GET", inboxPath(in)+"/messages/search?limit=20&query="+url.QueryEscape(q), nil, nil)
		case r < 75:
			if m, ok := s.pick(rng); ok {
				label := fmt.Sprintf("soak-%d", rng.IntN(5))
				s.must("updateMessageLabels", "PATCH", inboxPath(m.inbox)+"/messages/"+url.PathEscape(m.id)+"/labels",
					map[string]any{"addLabels": []string{label}, "removeLabels": []string{"unread"}}, nil)
			}
		case r < 82:
			var page struct {
				Threads []struct {
					ThreadID string `json:"threadId"`
				} `json:"threads"`
			}
			if s.must("listThreads", "GET", inboxPath(in)+"/threads?limit=10", nil, &page) && len(page.Threads) > 0 {
				th := page.Threads[rng.IntN(len(page.Threads))].ThreadID
				s.call("getThread", "GET", inboxPath(in)+"/threads/"+th, nil, nil)
				if rng.IntN(4) == 0 {
					s.must("updateThreadLabels", "PATCH", inboxPath(in)+"/threads/"+th+"/labels",
						map[string]any{"addLabels": []string{"soak-thread"}}, nil)
				}
			}
		case r < 88:
			s.call("listInboxes", "GET", "/v1/inboxes?limit=20", nil, nil)
		case r < 93:
			s.call("getUsage", "GET", "/v1/usage", nil, nil)
		case r < 97:
			s.call("getInbox", "GET", inboxPath(in), nil, nil)
		default:
			s.inboxLifecycle(rng)
		}
	}
}

// sender returns an inbox to send from, making a new one when the last is used up.
func (s *soak) sender() string {
	s.mu.Lock()
	idx := int(s.sends.Add(1)-1) / sendsPerBox
	for len(s.senders) <= idx {
		s.senders = append(s.senders, "")
	}
	addr := s.senders[idx]
	s.mu.Unlock()
	if addr != "" {
		return addr
	}
	name := fmt.Sprintf("out%d", idx)
	addr = name + "@" + domain
	status, b := s.call("createInbox", "POST", "/v1/inboxes", map[string]any{"username": name}, nil)
	if status != 200 && !bytes.Contains(b, []byte("inbox_conflict")) {
		s.fail("create sender %s: %d %s", name, status, b)
	}
	s.mu.Lock()
	s.senders[idx] = addr
	s.mu.Unlock()
	return addr
}

func (s *soak) send(rng *rand.Rand) {
	from := s.sender()
	to := fmt.Sprintf("in%d@%s", rng.IntN(inbound), domain)
	body := map[string]any{"to": []string{to, "partner@far.example"}, "subject": "soak send " + strconv.Itoa(rng.IntN(1e6)),
		"text": s.text(rng, 40), "idempotencyKey": fmt.Sprintf("soak-%d-%d", time.Now().UnixNano(), rng.Int64())}
	if rng.IntN(5) == 0 {
		body["attachments"] = []map[string]any{{"filename": "notes.txt", "contentType": "text/plain",
			"content": base64.StdEncoding.EncodeToString([]byte(s.text(rng, 200)))}}
	}
	var res struct {
		MessageID string `json:"messageId"`
	}
	if s.must("send", "POST", inboxPath(from)+"/messages/send", body, &res) {
		s.mu.Lock()
		s.sent[from] = append(s.sent[from], res.MessageID)
		s.received[to] = append(s.received[to], res.MessageID)
		s.mu.Unlock()
	}
}

func (s *soak) reply(rng *rand.Rand) {
	m, ok := s.pick(rng)
	if !ok {
		return
	}
	var res struct {
		MessageID string `json:"messageId"`
	}
	status, b := s.call("reply", "POST", inboxPath(m.inbox)+"/messages/"+url.PathEscape(m.id)+"/reply",
		map[string]any{"text": s.text(rng, 20), "idempotencyKey": fmt.Sprintf("soak-reply-%d", rng.Int64())}, &res)
	switch {
	case status == 200:
		s.mu.Lock()
		s.sent[m.inbox] = append(s.sent[m.inbox], res.MessageID)
		s.mu.Unlock()
	case status == 429: // the inbound inbox used its sends of the day: expected, not a failure
	case status != 0 && status < 500:
		s.fail("reply: %d %s", status, b)
	}
}

func (s *soak) pick(rng *rand.Rand) (msgRef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.known) == 0 {
		return msgRef{}, false
	}
	return s.known[rng.IntN(len(s.known))], true
}

func (s *soak) download(link string) {
	start := time.Now()
	res, err := s.http.Get(link)
	status := 0
	if err == nil {
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		status = res.StatusCode
	}
	s.mu.Lock()
	st := s.stats["downloadAttachment"]
	if st == nil {
		st = &opStats{count: map[int]int{}}
		s.stats["downloadAttachment"] = st
	}
	st.count[status]++
	st.duration = append(st.duration, time.Since(start))
	s.mu.Unlock()
	if err != nil || status != 200 {
		s.fail("download %s: %d %v", link, status, err)
	}
}

// inboxLifecycle makes an inbox, delivers to it over SMTP, reads it and deletes it.
func (s *soak) inboxLifecycle(rng *rand.Rand) {
	name := fmt.Sprintf("tmp%d", rng.Int64N(1e12))
	addr := name + "@" + domain
	if !s.must("createInbox", "POST", "/v1/inboxes", map[string]any{"username": name}, nil) {
		return
	}
	s.mu.Lock()
	s.gone[addr] = true
	s.mu.Unlock()
	if err := s.deliver(addr, fmt.Sprintf("<tmp-%d@customer.example>", rng.Int64()), rng); err != nil {
		s.fail("deliver to %s: %v", addr, err)
	}
	s.call("listMessages", "GET", inboxPath(addr)+"/messages", nil, nil)
	s.must("deleteInbox", "DELETE", inboxPath(addr), nil, nil)
}

func (s *soak) deliver(rcpt, id string, rng *rand.Rand) error {
	conn, err := net.DialTimeout("tcp", s.smtp, 10*time.Second)
	if err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	cl := smtp.NewClient(conn)
	defer cl.Close()
	return cl.SendMail("ann@customer.example", []string{rcpt}, bytes.NewReader(s.message(rcpt, id, rng)))
}

// message is a realistic inbound message; one in four answers an earlier one, one in ten
// carries an attachment.
func (s *soak) message(rcpt, id string, rng *rand.Rand) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: Customer %d <customer%d@customer.example>\r\nTo: %s\r\nSubject: soak %s\r\nMessage-ID: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\n",
		rng.IntN(50), rng.IntN(50), rcpt, words[rng.IntN(len(words))], id, time.Now().UTC().Format(time.RFC1123Z))
	if m, ok := s.pick(rng); ok && rng.IntN(4) == 0 && m.inbox == rcpt {
		fmt.Fprintf(&b, "In-Reply-To: %s\r\nReferences: %s\r\n", m.id, m.id)
	}
	text := s.text(rng, 60)
	if rng.IntN(10) == 0 {
		b.WriteString("Content-Type: multipart/mixed; boundary=soakb\r\n\r\n--soakb\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
		b.WriteString(text + "\r\n--soakb\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"report.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
		raw := make([]byte, 4096)
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		enc := base64.StdEncoding.EncodeToString(raw)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\r\n--soakb--\r\n")
	} else {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\n\r\n" + text + "\r\n")
	}
	return b.Bytes()
}

// smtpClient delivers paced messages over one session at a time, reconnecting every few
// dozen messages as real MTAs do; some messages go to two inboxes at once.
func (s *soak) smtpClient(c int, tick <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(c), 7))
	var cl *smtp.Client
	sentOnConn := 0
	defer func() {
		if cl != nil {
			cl.Quit()
		}
	}()
	for range tick {
		if cl == nil || sentOnConn >= 25 {
			if cl != nil {
				cl.Quit()
			}
			conn, err := net.DialTimeout("tcp", s.smtp, 10*time.Second)
			if err != nil {
				s.transport.Add(1)
				s.fail("smtp dial: %v", err)
				cl = nil
				continue
			}
			cl, sentOnConn = smtp.NewClient(conn), 0
		}
		rcpts := []string{fmt.Sprintf("in%d@%s", rng.IntN(inbound), domain)}
		if rng.IntN(5) == 0 {
			if other := fmt.Sprintf("in%d@%s", rng.IntN(inbound), domain); other != rcpts[0] {
				rcpts = append(rcpts, other)
			}
		}
		id := fmt.Sprintf("<soak-%d-%d@customer.example>", c, s.seq.Add(1))
		start := time.Now()
		err := cl.SendMail("customer@customer.example", rcpts, bytes.NewReader(s.message(rcpts[0], id, rng)))
		sentOnConn++
		s.mu.Lock()
		st := s.stats["smtp"]
		if st == nil {
			st = &opStats{count: map[int]int{}}
			s.stats["smtp"] = st
		}
		code := 250
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			code = se.Code
		} else if err != nil {
			code = 0
		}
		st.count[code]++
		st.duration = append(st.duration, time.Since(start))
		if err == nil {
			for _, r := range rcpts {
				s.received[r] = append(s.received[r], id)
				s.known = append(s.known, msgRef{r, id})
			}
		}
		s.mu.Unlock()
		if err != nil {
			if code >= 400 && code < 500 {
				s.smtpTemp.Add(1)
			} else {
				s.transport.Add(1)
			}
			s.fail("smtp %s: %v", id, err)
			cl.Close()
			cl = nil
		}
	}
}

// monitor samples the server's memory, descriptors and queues every 10 s (more often
// for short runs).
func (s *soak) monitor(deadline time.Time) {
	every := min(10*time.Second, max(time.Second, s.duration/30))
	for {
		smp := s.sampleNow()
		s.mu.Lock()
		s.samples = append(s.samples, smp)
		s.mu.Unlock()
		if time.Until(deadline) <= 0 {
			return
		}
		time.Sleep(min(every, time.Until(deadline)+time.Millisecond))
	}
}

func (s *soak) sampleNow() sample {
	smp := sample{at: time.Since(s.started)}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				smp.rss = kb << 10
			case "RssAnon:":
				smp.anon = kb << 10
			case "RssFile:":
				smp.file = kb << 10
			}
		}
	}
	m := s.metrics()
	smp.heap = int64(m["go_heap_objects_bytes"])
	smp.live = int64(m["go_heap_live_bytes"])
	smp.goResident = int64(m["go_memory_total_bytes"] - m["go_memory_released_bytes"])
	smp.goroutines = int64(m["go_goroutines"])
	smp.fds = int64(m["process_open_fds"])
	smp.outbound = int64(m[`inboxd_queue_depth{queue="outbound"}`])
	smp.index = int64(m[`inboxd_queue_depth{queue="index"}`])
	smp.triageQ = int64(m[`inboxd_queue_depth{queue="triage"}`])
	smp.messagesIngested = int64(m[`inboxd_smtp_messages_total{result="accepted"}`])
	for k, v := range m {
		if strings.HasPrefix(k, "inboxd_http_requests_total{") {
			smp.requests += int64(v)
		}
	}
	return smp
}

// metricsSource is the server's /metrics.
func (s *soak) metricsSource() benchkit.MetricsSource {
	return benchkit.MetricsSource{Base: s.base, Token: metricsToken, HTTP: s.http}
}

// metrics reads the server's metrics; none when it does not answer (the sample says so).
func (s *soak) metrics() map[string]float64 {
	m, err := s.metricsSource().Read(context.Background())
	if err != nil {
		return map[string]float64{}
	}
	return m
}

// drain waits until the outbound, index and triage queues are empty.
func (s *soak) drain(limit time.Duration) error {
	return benchkit.Drain(context.Background(), limit, s.metricsSource())
}

// verify lists every inbox that received or sent mail and checks that each acknowledged
// Message-ID is there exactly once.
func (s *soak) verify() (lost []string, checked int) {
	s.mu.Lock()
	want := map[string][]string{}
	for in, ids := range s.received {
		if !s.gone[in] {
			want[in] = append(want[in], ids...)
		}
	}
	for in, ids := range s.sent {
		want[in] = append(want[in], ids...)
	}
	s.mu.Unlock()
	inboxes := make([]string, 0, len(want))
	for in := range want {
		inboxes = append(inboxes, in)
	}
	sort.Strings(inboxes)
	for _, in := range inboxes {
		have := map[string]int{}
		token := ""
		for {
			var page struct {
				Messages []struct {
					MessageID string `json:"messageId"`
				} `json:"messages"`
				NextPageToken string `json:"nextPageToken"`
			}
			path := inboxPath(in) + "/messages?limit=100"
			if token != "" {
				path += "&pageToken=" + url.QueryEscape(token)
			}
			if !s.must("verify:listMessages", "GET", path, nil, &page) {
				break
			}
			for _, m := range page.Messages {
				have[m.MessageID]++
			}
			if token = page.NextPageToken; token == "" {
				break
			}
		}
		seen := map[string]bool{}
		for _, id := range want[in] {
			if seen[id] {
				continue // a message sent to the same inbox twice over SMTP is stored once
			}
			seen[id] = true
			checked++
			if have[id] != 1 {
				lost = append(lost, fmt.Sprintf("%s in %s: stored %d times", id, in, have[id]))
			}
		}
	}
	return lost, checked
}

// serverErrors returns the ERROR lines of the server's log.
func (s *soak) serverErrors() []string {
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return out
}

func (s *soak) report(traffic, drained time.Duration, lost []string, checked int, final sample, exitErr error, errorLines []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	total, byClass := 0, map[string]int{}
	ops := make([]string, 0, len(s.stats))
	for op, st := range s.stats {
		ops = append(ops, op)
		for status, n := range st.count {
			total += n
			switch {
			case op == "smtp":
				byClass["smtp "+strconv.Itoa(status)] += n
			case status == 0:
				byClass["no answer"] += n
			default:
				byClass[strconv.Itoa(status/100)+"xx"] += n
			}
		}
	}
	sort.Strings(ops)
	w("Traffic: %s with %d API clients (%.0f requests/s) and %d SMTP clients (%.0f messages/s), then %s to drain the queues.\n\n",
		traffic.Round(time.Second), s.apiClients, s.apiRate, s.smtpClients, s.smtpRate, drained.Round(100*time.Millisecond))
	w("| operation | requests | statuses | p50 ms | p99 ms | max ms |\n| --- | ---: | --- | ---: | ---: | ---: |\n")
	for _, op := range ops {
		st := s.stats[op]
		n := 0
		var statuses []string
		codes := make([]int, 0, len(st.count))
		for c := range st.count {
			codes = append(codes, c)
		}
		slices.Sort(codes)
		for _, c := range codes {
			n += st.count[c]
			statuses = append(statuses, fmt.Sprintf("%d×%d", st.count[c], c))
		}
		slices.Sort(st.duration)
		q := func(p float64) string {
			i := int(math.Ceil(p*float64(len(st.duration)))) - 1
			return fmt.Sprintf("%.1f", float64(st.duration[max(0, i)].Microseconds())/1000)
		}
		w("| %s | %d | %s | %s | %s | %s |\n", op, n, strings.Join(statuses, " "), q(0.5), q(0.99), q(1))
	}
	w("\n")

	// Memory after warm-up: the first fifth of the run (at least one minute when the run
	// allows) warms caches, the index and the pools; then compare its end with the last
	// fifth.
	warm := traffic / 5
	var after []sample
	for _, smp := range s.samples {
		if smp.at >= warm {
			after = append(after, smp)
		}
	}
	flat := true
	if len(after) >= 4 {
		k := max(1, len(after)/5)
		avg := func(xs []sample, f func(sample) int64) float64 {
			t := 0.0
			for _, x := range xs {
				t += float64(f(x))
			}
			return t / float64(len(xs))
		}
		first, last := after[:k], after[len(after)-k:]
		anon := func(x sample) int64 { return x.anon }
		heap := func(x sample) int64 { return x.heap }
		rss := func(x sample) int64 { return x.rss }
		growth := func(f func(sample) int64) float64 { return (avg(last, f) - avg(first, f)) / avg(first, f) * 100 }
		// Anonymous memory is what a leak grows (Go heap, SQLite's caches); file-backed
		// RSS follows the index files the kernel maps, which grow with the data. But it
		// also follows the collector's pacing: at GOGC 400 the heap may grow to five times
		// what the last collection kept before the next one. So anonymous memory that
		// grew is a leak only if what the collector keeps (the live heap) or the memory
		// outside the Go runtime (SQLite, C) grew too.
		grew := func(f func(sample) int64, pct float64, abs float64) bool {
			return growth(f) >= pct && avg(last, f)-avg(first, f) >= abs
		}
		live := func(x sample) int64 { return x.live }
		outside := func(x sample) int64 { return x.anon - x.goResident }
		flat = !grew(anon, 25, 32<<20) || !grew(live, 25, 16<<20) && avg(last, outside)-avg(first, outside) < 16<<20
		w("Memory after warm-up (%s): resident %s → %s MiB (%+.0f%%), anonymous %s → %s MiB (%+.0f%%), Go heap %s → %s MiB (%+.0f%%), live heap %s → %s MiB (%+.0f%%), outside Go %s → %s MiB; flat: %v.\n\n",
			warm.Round(time.Second), mb(int64(avg(first, rss))), mb(int64(avg(last, rss))), growth(rss),
			mb(int64(avg(first, anon))), mb(int64(avg(last, anon))), growth(anon),
			mb(int64(avg(first, heap))), mb(int64(avg(last, heap))), growth(heap),
			mb(int64(avg(first, live))), mb(int64(avg(last, live))), growth(live),
			mb(int64(avg(first, outside))), mb(int64(avg(last, outside))), flat)
	}
	w("| at | VmRSS MiB | RssAnon MiB | RssFile MiB | Go heap MiB | goroutines | fds | outbound | index | triage |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	step := max(1, len(s.samples)/12)
	for i, smp := range s.samples {
		if i%step == 0 || i == len(s.samples)-1 {
			w("| %s | %s | %s | %s | %s | %d | %d | %d | %d | %d |\n", smp.at.Round(time.Second), mb(smp.rss), mb(smp.anon), mb(smp.file),
				mb(smp.heap), smp.goroutines, smp.fds, smp.outbound, smp.index, smp.triageQ)
		}
	}
	w("| drained | %s | %s | %s | %s | %d | %d | %d | %d | %d |\n\n", mb(final.rss), mb(final.anon), mb(final.file), mb(final.heap),
		final.goroutines, final.fds, final.outbound, final.index, final.triageQ)

	classes := make([]string, 0, len(byClass))
	for c := range byClass {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	var cl []string
	for _, c := range classes {
		cl = append(cl, fmt.Sprintf("%s: %d", c, byClass[c]))
	}
	w("Answers: %d in all (%s). 5xx: %d. Broken connections: %d. SMTP 4xx: %d.\n", total, strings.Join(cl, ", "),
		s.fiveXX.Load(), s.transport.Load(), s.smtpTemp.Load())
	w("Acknowledged messages checked after the drain: %d; lost or duplicated: %d.\n", checked, len(lost))
	w("Server ERROR log lines: %d. Exit after SIGTERM: %v.\n", len(errorLines), exitOK(exitErr))
	ok := s.fiveXX.Load() == 0 && s.transport.Load() == 0 && s.smtpTemp.Load() == 0 && len(lost) == 0 && flat && exitErr == nil && len(errorLines) == 0
	w("\nResult: **%s**.\n", map[bool]string{true: "pass", false: "FAIL"}[ok])
	for i, l := range lost {
		if i == 10 {
			break
		}
		w("- lost: %s\n", l)
	}
	for _, f := range s.failures {
		w("- %s\n", f)
	}
	for i, l := range errorLines {
		if i == 5 {
			break
		}
		w("- server: %s\n", l)
	}
	fmt.Print(b.String())
	return ok
}

func exitOK(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}
