package benchkit

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// smtpClient pipelines (RFC 2920) as Postfix and Exim do: MAIL, RCPT and DATA go in one
// write, then the message, so a message costs two round trips.
type smtpClient struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

// dialSMTP connects and says EHLO. The deadlines turn a server that hangs into an error
// instead of a benchmark that never ends.
func dialSMTP(addr string) (*smtpClient, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &smtpClient{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
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

func (p *smtpClient) send(from, to string, msg []byte) error {
	p.conn.SetDeadline(time.Now().Add(time.Minute))
	return p.sendWith(from, to, func(w *bufio.Writer) error {
		_, err := w.Write(msg) // no generated line starts with ".": no dot-stuffing needed
		return err
	}, 250)
}

// sendWith sends one message whose data write writes (without the final dot), and checks
// that the reply to the end of data has code want.
func (p *smtpClient) sendWith(from, to string, write func(*bufio.Writer) error, want int) error {
	fmt.Fprintf(p.w, "MAIL FROM:<%s>\r\nRCPT TO:<%s>\r\nDATA\r\n", from, to)
	if err := p.w.Flush(); err != nil {
		return err
	}
	for _, code := range []int{250, 250, 354} {
		if _, err := p.reply(code); err != nil {
			return err
		}
	}
	if err := write(p.w); err != nil {
		return err
	}
	p.w.WriteString(".\r\n")
	if err := p.w.Flush(); err != nil {
		return err
	}
	_, err := p.reply(want)
	return err
}

// SendOne connects to addr and sends one message whose data write writes (lines that
// start with "." must be dot-stuffed by write), allowing limit for the whole exchange.
// It returns the reply to the end of data ("250 ..." when stored); err is a failure to
// get one.
func SendOne(addr, from, to string, limit time.Duration, write func(*bufio.Writer) error) (string, error) {
	p, err := dialSMTP(addr)
	if err != nil {
		return "", err
	}
	defer p.close()
	p.conn.SetDeadline(time.Now().Add(limit))
	err = p.sendWith(from, to, write, 250)
	var bad badReply
	switch {
	case err == nil:
		return "250", nil
	case errors.As(err, &bad):
		return string(bad), nil
	}
	return "", err
}

// reply reads one reply, which may span lines, and checks its code.
func (p *smtpClient) reply(want int) (string, error) {
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
				return "", badReply(strings.TrimSpace(line))
			}
			return all.String(), nil
		}
	}
}

// badReply is a reply with another code than the one wanted.
type badReply string

func (r badReply) Error() string { return fmt.Sprintf("unexpected reply %q", string(r)) }

func (p *smtpClient) close() {
	p.w.WriteString("QUIT\r\n")
	p.w.Flush()
	p.conn.Close()
}
