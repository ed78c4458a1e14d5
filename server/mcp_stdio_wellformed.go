package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// wellFormedLines passes on the lines of in that are JSON-RPC messages and answers the
// others on out itself: the SDK ends the whole session at a line it cannot decode, and
// the answers to requests before it were lost. A line that is not JSON gets the error
// -32700, one that is not a JSON-RPC 2.0 message -32600 (jsonRPCProblem, as over HTTP),
// with id null; blank lines are skipped.
type wellFormedLines struct {
	in   *bufio.Reader
	out  io.Writer // shared with the SDK's writes: a lockedWriter
	rest []byte
}

func (w *wellFormedLines) Read(p []byte) (int, error) {
	for len(w.rest) == 0 {
		line, err := w.in.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if code, msg := jsonRPCProblem(line); code != 0 {
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
			if _, werr := w.out.Write(append(b, '\n')); werr != nil {
				return 0, werr
			}
			continue
		}
		w.rest = line
	}
	n := copy(p, w.rest)
	w.rest = w.rest[n:]
	return n, nil
}

// lockedWriter serializes whole-message writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
