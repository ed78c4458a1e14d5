package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// answeredIO holds back the end of the client's input until every request read from it
// has been answered. The SDK ends the session as soon as its reader sees the end of
// input, and answers still being prepared were lost: a script that wrote its requests
// and closed its end of the pipe got some of its answers, or none.
type answeredIO struct {
	ctx  context.Context
	in   *bufio.Reader
	out  io.Writer
	rest []byte // what is left of the line being read

	mu      sync.Mutex
	open    map[string]bool // ids (as JSON) of requests read and not answered
	changed chan struct{}   // closed, and replaced, whenever open shrinks
}

// answeredWait bounds the wait at the end of input: the HTTP client gives up on inboxd
// after two minutes, so every request is answered by then.
const answeredWait = 2*time.Minute + 5*time.Second

func newAnsweredIO(ctx context.Context, in io.Reader, out io.Writer) *answeredIO {
	return &answeredIO{ctx: ctx, in: bufio.NewReader(in), out: out, open: map[string]bool{}, changed: make(chan struct{})}
}

func (a *answeredIO) Read(p []byte) (int, error) {
	if len(a.rest) == 0 {
		line, err := a.in.ReadBytes('\n')
		if len(line) == 0 {
			if err == io.EOF {
				a.waitAnswered()
			}
			return 0, err
		}
		a.note(line, true)
		a.rest = line
	}
	n := copy(p, a.rest)
	a.rest = a.rest[n:]
	return n, nil
}

// Write passes the SDK's messages on (one whole message a call), then notes the answers.
func (a *answeredIO) Write(p []byte) (int, error) {
	n, err := a.out.Write(p)
	a.note(p, false)
	return n, err
}

func (a *answeredIO) Close() error { return nil }

// rpcHead is what answeredIO reads of a JSON-RPC message.
type rpcHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
	} `json:"params"`
}

// note records the requests of one line read (in) or the answers of one written.
func (a *answeredIO) note(line []byte, in bool) {
	line = bytes.TrimSpace(line)
	var msgs []rpcHead
	if bytes.HasPrefix(line, []byte("[")) {
		if json.Unmarshal(line, &msgs) != nil {
			return
		}
	} else {
		var m rpcHead
		if json.Unmarshal(line, &m) != nil {
			return
		}
		msgs = []rpcHead{m}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	shrunk := false
	for _, m := range msgs {
		id := string(bytes.TrimSpace(m.ID))
		switch {
		case in && m.Method == "notifications/cancelled":
			// A cancelled request may go unanswered.
			delete(a.open, string(bytes.TrimSpace(m.Params.RequestID)))
			shrunk = true
		case id == "" || id == "null":
		case in && m.Method != "":
			a.open[id] = true
		case !in && m.Method == "":
			delete(a.open, id)
			shrunk = true
		}
	}
	if shrunk {
		close(a.changed)
		a.changed = make(chan struct{})
	}
}

func (a *answeredIO) waitAnswered() {
	deadline := time.NewTimer(answeredWait)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		n, changed := len(a.open), a.changed
		a.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			return
		case <-a.ctx.Done():
			return
		}
	}
}
