package protect

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// clamd is a client of ClamAV's daemon: the whole message is streamed with INSTREAM (clamd
// decodes MIME and archives itself) over a fresh connection.
type clamd struct {
	network, addr string
	timeout       time.Duration
}

// parseClamd reads --clamd: unix:PATH or tcp:HOST:PORT.
func parseClamd(s string) (*clamd, error) {
	kind, addr, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == "unix" && addr != "":
		return &clamd{network: "unix", addr: addr}, nil
	case ok && kind == "tcp":
		if host, port, err := net.SplitHostPort(addr); err == nil && host != "" && port != "" {
			return &clamd{network: "tcp", addr: addr}, nil
		}
	}
	return nil, fmt.Errorf("clamd address %q: want unix:PATH or tcp:HOST:PORT", s)
}

const (
	clamdChunk    = 64 << 10
	maxClamdReply = 64 << 10
)

// clamdVerdict is one INSTREAM answer.
type clamdVerdict struct {
	signatures []string // FOUND
	errText    string   // ERROR: clamd could not scan (size limit, broken input)
}

// scan streams data to clamd. A failure to reach clamd or to get an answer is an error (the
// caller fails closed); an answer of ERROR is a verdict: the message could not be scanned.
func (c *clamd) scan(ctx context.Context, data []byte) (*clamdVerdict, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, c.network, c.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	werr := writeInstream(conn, data)
	// clamd answers and closes early when the stream passes its size limit: read the answer
	// even when writing failed.
	reply, rerr := bufio.NewReader(io.LimitReader(conn, maxClamdReply)).ReadString(0)
	reply = strings.TrimRight(reply, "\x00\r\n")
	if reply == "" {
		if werr != nil {
			return nil, fmt.Errorf("clamd: sending: %w", werr)
		}
		return nil, fmt.Errorf("clamd: no answer: %v", rerr)
	}
	return parseClamdReply(reply)
}

func writeInstream(conn net.Conn, data []byte) error {
	w := bufio.NewWriterSize(conn, clamdChunk+4)
	if _, err := w.WriteString("zINSTREAM\x00"); err != nil {
		return err
	}
	var size [4]byte
	for len(data) > 0 {
		n := min(len(data), clamdChunk)
		binary.BigEndian.PutUint32(size[:], uint32(n))
		w.Write(size[:])
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	binary.BigEndian.PutUint32(size[:], 0)
	w.Write(size[:])
	return w.Flush()
}

var errClamdAnswer = errors.New("clamd: unexpected answer")

// parseClamdReply reads "stream: OK", "stream: NAME FOUND" or "... ERROR".
func parseClamdReply(reply string) (*clamdVerdict, error) {
	switch {
	case strings.HasSuffix(reply, " FOUND"):
		_, rest, _ := strings.Cut(reply, ": ")
		sig := strings.TrimSpace(strings.TrimSuffix(rest, " FOUND"))
		if sig == "" {
			sig = "unknown"
		}
		return &clamdVerdict{signatures: []string{clip(sig, 1000)}}, nil
	case strings.HasSuffix(reply, "ERROR"):
		return &clamdVerdict{errText: clip(reply, 300)}, nil
	case strings.HasSuffix(reply, ": OK"):
		return &clamdVerdict{}, nil
	}
	return nil, fmt.Errorf("%w: %q", errClamdAnswer, clip(reply, 100))
}
