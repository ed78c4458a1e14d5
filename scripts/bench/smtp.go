package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeDNS answers the server's SPF, DKIM and DMARC queries at once, as a local caching
// resolver in front of a real MX would: the ingest senders publish SPF (allowing
// 127.0.0.1) and a DMARC policy; every other name does not exist.
func fakeDNS() (addr string, stop func(), err error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := dnsAnswer(buf[:n]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String(), func() { pc.Close() }, nil
}

var txtRecords = map[string]string{
	"customer.example.":        "v=spf1 ip4:127.0.0.1 -all",
	"_dmarc.customer.example.": "v=DMARC1; p=none",
}

func dnsAnswer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	name := strings.ToLower(qs[0].Name.String())
	txt, ok := txtRecords[name]
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(qs[0])
	b.StartAnswers()
	if ok && qs[0].Type == dnsmessage.TypeTXT {
		b.TXTResource(dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: 300}, dnsmessage.TXTResource{TXT: []string{txt}})
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// ingestMessages returns n messages of about size bytes each, from 300 senders of
// customer.example, every fourth a reply to an earlier one, with English-like text.
func ingestMessages(c *corpus, n, size int, rcpts []string, tag string) ([][]byte, []string) {
	msgs := make([][]byte, n)
	to := make([]string, n)
	now := time.Now()
	for i := range n {
		to[i] = rcpts[i%len(rcpts)]
		var b bytes.Buffer
		fmt.Fprintf(&b, "From: \"Customer %d\" <sender%d@customer.example>\r\n", i%300, i%300)
		fmt.Fprintf(&b, "To: <%s>\r\n", to[i])
		fmt.Fprintf(&b, "Subject: %s\r\n", c.subject())
		fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
		fmt.Fprintf(&b, "Message-ID: <%s-%d@customer.example>\r\n", tag, i)
		if i > 4 && i%4 == 0 {
			fmt.Fprintf(&b, "In-Reply-To: <%s-%d@customer.example>\r\nReferences: <%s-%d@customer.example>\r\n", tag, i-4, tag, i-4)
		}
		b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nHi,\r\n\r\n")
		line := 0
		for b.Len() < size-40 {
			w := c.word()
			b.WriteString(w)
			line += len(w) + 1
			if line > 70 {
				b.WriteString("\r\n")
				line = 0
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString("\r\n\r\nBest regards,\r\nCustomer\r\n")
		msgs[i] = b.Bytes()
	}
	return msgs, to
}

type ingestResult struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r ingestResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// ingest sends the messages over conns pipelined SMTP connections; the clock runs until
// the last 250. No message is started after limit: a slow server is measured on fewer
// messages rather than making the run long.
func ingest(addr string, msgs [][]byte, to []string, conns int, limit time.Duration) (ingestResult, error) {
	var next, done atomic.Int64
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
				if i >= len(msgs) || time.Since(start) > limit {
					return
				}
				t := time.Now()
				if err := s.send("sender@customer.example", to[i], msgs[i]); err != nil {
					errs <- fmt.Errorf("message %d: %w", i, err)
					return
				}
				done.Add(1)
				lat[c] = append(lat[c], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return ingestResult{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	return ingestResult{n: int(done.Load()), elapsed: elapsed, p50: pct(all, 50), p99: pct(all, 99)}, nil
}

// pipelined is an SMTP client that pipelines (RFC 2920) as Postfix does: MAIL, RCPT and
// DATA in one write, then the message.
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
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
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
	p.conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(p.w, "MAIL FROM:<%s>\r\nRCPT TO:<%s>\r\nDATA\r\n", from, to)
	if err := p.w.Flush(); err != nil {
		return err
	}
	for _, code := range []int{250, 250, 354} {
		if _, err := p.reply(code); err != nil {
			return err
		}
	}
	p.w.Write(msg) // no line starts with ".": no dot-stuffing needed
	p.w.WriteString(".\r\n")
	if err := p.w.Flush(); err != nil {
		return err
	}
	_, err := p.reply(250)
	return err
}

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
