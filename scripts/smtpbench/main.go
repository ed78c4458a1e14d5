// Command smtpbench measures inboxd's mail throughput end to end: SMTP ingest of small
// messages over concurrent connections, and API sends to a local inbox until every one
// is delivered. It starts the binary it is given on a fresh database in a temporary
// directory, with its defaults: parsing, protection (SPF, DKIM and DMARC against a local
// fake DNS, spam rules, antivirus), threading, the search index queue and the triage queue
// are all on. It creates the inboxes it needs through the API, runs both measurements and
// stops the server.
//
//	go build -tags '...' -o /tmp/inboxd . && go run ./scripts/smtpbench -bin /tmp/inboxd
//
// scripts/smtpbench.sh does exactly that.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "", "inboxd binary to start (required)")
	n := flag.Int("n", 20000, "messages to send over SMTP")
	conns := flag.Int("conns", 8, "concurrent SMTP connections")
	size := flag.Int("size", 2048, "approximate message size in bytes")
	inboxes := flag.Int("inboxes", 8, "recipient inboxes for the SMTP run")
	sends := flag.Int("sends", 1000, "API sends to a local inbox")
	sendConc := flag.Int("send-conc", 8, "concurrent API send requests")
	keep := flag.Bool("keep", false, "keep the temporary directory (database, server log)")
	extra := flag.String("server-args", "", "extra arguments for inboxd serve, space separated (e.g. \"--triage off\"), to see what a part costs")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "smtpbench: -bin is required")
		os.Exit(2)
	}
	if err := run(*bin, strings.Fields(*extra), *n, *conns, *size, *inboxes, *sends, *sendConc, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "smtpbench:", err)
		os.Exit(1)
	}
}

func run(bin string, extra []string, n, conns, size, inboxes, sends, sendConc int, keep bool) error {
	dir, err := os.MkdirTemp("", "smtpbench-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	} else {
		fmt.Println("working directory:", dir)
	}
	dns, stopDNS, err := fakeDNS()
	if err != nil {
		return err
	}
	defer stopDNS()
	srv, err := start(bin, dir, dns, extra)
	if err != nil {
		return err
	}
	defer srv.stop()

	var rcpts []string
	for i := range inboxes {
		addr := fmt.Sprintf("in%d@inboxd.test", i)
		if err := srv.api("POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("in%d", i)}, nil); err != nil {
			return err
		}
		rcpts = append(rcpts, addr)
	}
	if n > 0 {
		if err := benchSMTP(srv.smtp, rcpts, n, conns, size); err != nil {
			return err
		}
	}
	if sends > 0 {
		if err := benchSends(srv, sends, sendConc); err != nil {
			return err
		}
	}
	return nil
}

type server struct {
	cmd       *exec.Cmd
	base      string
	smtp      string
	key       string
	logFile   *os.File
	transport *http.Client
}

var (
	keyRE    = regexp.MustCompile(`bze_[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}`)
	listenRE = regexp.MustCompile(`listening on (\S+)`)
	smtpRE   = regexp.MustCompile(`SMTP listening on (\S+)`)
)

func start(bin, dir, dns string, extra []string) (*server, error) {
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--db", filepath.Join(dir, "bench.db"), "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
		"--domain", "inboxd.test", "--dns", dns}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, logFile: logf, transport: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	sc := bufio.NewScanner(out)
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	for sc.Scan() {
		line := sc.Text()
		if k := keyRE.FindString(line); k != "" {
			s.key = k
		}
		if m := smtpRE.FindStringSubmatch(line); m != nil {
			s.smtp = m[1]
			break
		}
		if m := listenRE.FindStringSubmatch(line); m != nil {
			s.base = "http://" + m[1]
		}
	}
	deadline.Stop()
	go io.Copy(io.Discard, out)
	if s.smtp == "" || s.base == "" || s.key == "" {
		s.stop()
		return nil, fmt.Errorf("server did not start; see %s", logf.Name())
	}
	return s, nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.logFile.Close()
}

func (s *server) api(method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, r)
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := s.transport.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// message returns a realistic message of about size bytes: a mail client's headers, a
// text body, and for one message in four a reply to an earlier one (threading work).
func message(i, size int, rcpt string, rng *rand.Rand) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Return-Path: <sender%d@customer.example>\r\n", i%300)
	fmt.Fprintf(&b, "From: \"Customer %d\" <sender%d@customer.example>\r\n", i%300, i%300)
	fmt.Fprintf(&b, "To: <%s>\r\n", rcpt)
	fmt.Fprintf(&b, "Subject: Order %d: question about delivery\r\n", i)
	fmt.Fprintf(&b, "Date: %s\r\n", time.Now().Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <bench-%d-%d@customer.example>\r\n", i, rng.Int64())
	if i > 4 && i%4 == 0 {
		fmt.Fprintf(&b, "In-Reply-To: <bench-%d@customer.example>\r\nReferences: <bench-%d@customer.example>\r\n", i-4, i-4)
	}
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	words := []string{"order", "delivery", "invoice", "thanks", "please", "package", "tracking", "refund", "today", "tomorrow", "address", "café"}
	line := 0
	for b.Len() < size {
		w := words[rng.IntN(len(words))]
		b.WriteString(w)
		line += len(w) + 1
		if line > 70 {
			b.WriteString("\r\n")
			line = 0
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

func benchSMTP(addr string, rcpts []string, n, conns, size int) error {
	msgs := make([][]byte, n)
	to := make([]string, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		to[i] = rcpts[i%len(rcpts)]
		msgs[i] = message(i, size, to[i], rng)
	}
	var next atomic.Int64
	lat := make([][]time.Duration, conns)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := dialPipelined(addr)
			if err != nil {
				errs <- err
				return
			}
			defer s.close()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				if err := s.send("sender@customer.example", to[i], msgs[i]); err != nil {
					errs <- fmt.Errorf("message %d: %w", i, err)
					return
				}
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	fmt.Printf("SMTP ingest: %d messages of ~%d bytes over %d pipelined connections in %.2f s = %.0f messages/s (latency p50 %.1f ms, p99 %.1f ms)\n",
		n, size, conns, elapsed.Seconds(), float64(n)/elapsed.Seconds(), ms(pct(all, 50)), ms(pct(all, 99)))
	return nil
}

func benchSends(s *server, sends, conc int) error {
	// The send limit is 250 per inbox in 24 h, so the sends come from several inboxes.
	senders := (sends + 199) / 200
	for i := range senders {
		if err := s.api("POST", "/v1/inboxes", map[string]any{"username": fmt.Sprintf("sender%d", i)}, nil); err != nil {
			return err
		}
	}
	if err := s.api("POST", "/v1/inboxes", map[string]any{"username": "target"}, nil); err != nil {
		return err
	}
	var next atomic.Int64
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= sends {
					return
				}
				body := map[string]any{"to": []string{"target@inboxd.test"}, "subject": fmt.Sprintf("Bench %d", i),
					"text": "Hello from the benchmark. " + strings.Repeat("Some more words. ", 20), "idempotencyKey": fmt.Sprintf("bench-%d", i)}
				if err := s.api("POST", fmt.Sprintf("/v1/inboxes/sender%d%%40inboxd.test/messages/send", i%senders), body, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	accepted := time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		got, err := count(s, "target%40inboxd.test")
		if err != nil {
			return err
		}
		if got >= sends {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d sends delivered after 60 s", got, sends)
		}
		time.Sleep(5 * time.Millisecond)
	}
	all := time.Since(start)
	fmt.Printf("API sends to a local inbox: %d sends (%d concurrent) accepted in %.2f s, all delivered into the inbox after %.2f s\n",
		sends, conc, accepted.Seconds(), all.Seconds())
	return nil
}

// count pages through an inbox's messages.
func count(s *server, inbox string) (int, error) {
	n, token := 0, ""
	for {
		var page struct {
			Messages      []json.RawMessage `json:"messages"`
			NextPageToken string            `json:"nextPageToken"`
		}
		path := "/v1/inboxes/" + inbox + "/messages?limit=100"
		if token != "" {
			path += "&pageToken=" + token
		}
		if err := s.api("GET", path, nil, &page); err != nil {
			return 0, err
		}
		n += len(page.Messages)
		if page.NextPageToken == "" {
			return n, nil
		}
		token = page.NextPageToken
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pipelined is an SMTP client that pipelines (RFC 2920) as Postfix and Exim do: MAIL,
// RCPT and DATA go in one write, then the message, so a message costs two round trips.
type pipelined struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func dialPipelined(addr string) (*pipelined, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &pipelined{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	if _, err := p.reply(220); err != nil {
		conn.Close()
		return nil, err
	}
	p.w.WriteString("EHLO bench.example\r\n")
	p.w.Flush()
	ext, err := p.reply(250)
	if err != nil || !strings.Contains(ext, "PIPELINING") {
		conn.Close()
		return nil, fmt.Errorf("EHLO: no PIPELINING (%v)", err)
	}
	return p, nil
}

func (p *pipelined) send(from, to string, msg []byte) error {
	fmt.Fprintf(p.w, "MAIL FROM:<%s>\r\nRCPT TO:<%s>\r\nDATA\r\n", from, to)
	if err := p.w.Flush(); err != nil {
		return err
	}
	for _, code := range []int{250, 250, 354} {
		if _, err := p.reply(code); err != nil {
			return err
		}
	}
	// Dot-stuffing: the generated messages have no line starting with ".".
	p.w.Write(msg)
	p.w.WriteString(".\r\n")
	if err := p.w.Flush(); err != nil {
		return err
	}
	_, err := p.reply(250)
	return err
}

// reply reads one reply, which may span lines, and checks its code.
func (p *pipelined) reply(want int) (string, error) {
	var all strings.Builder
	for {
		line, err := p.r.ReadString('\n')
		if err != nil {
			return "", err
		}
		all.WriteString(line)
		if len(line) < 4 {
			return "", fmt.Errorf("bad reply %q", line)
		}
		if line[3] == ' ' {
			if !strings.HasPrefix(line, strconv.Itoa(want)) {
				return "", fmt.Errorf("want %d, got %q", want, strings.TrimSpace(line))
			}
			return all.String(), nil
		}
	}
}

func (p *pipelined) close() {
	p.w.WriteString("QUIT\r\n")
	p.w.Flush()
	p.conn.Close()
}
