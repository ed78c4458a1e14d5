package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// sseEvent is one Server-Sent Event, or a comment line.
type sseEvent struct {
	id, typ, data string
	comment       string
}

// sseStream is an open GET /v1/events, read by a goroutine of its own.
type sseStream struct {
	t      testing.TB
	res    *http.Response
	events chan sseEvent // closed when the stream ends
	cancel context.CancelFunc
}

// openStream opens a stream that must start (200, text/event-stream).
func (e *env) openStream(key, query string, headers ...string) *sseStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	res := e.requestStream(ctx, key, query, headers...)
	qt.Assert(e.t, res.StatusCode, qt.Equals, 200)
	qt.Assert(e.t, res.Header.Get("Content-Type"), qt.Equals, "text/event-stream")
	qt.Assert(e.t, res.Header.Get("Cache-Control"), qt.Equals, "no-store")
	s := &sseStream{t: e.t, res: res, events: make(chan sseEvent, 1000), cancel: cancel}
	go s.read()
	e.t.Cleanup(s.close)
	return s
}

func (s *sseStream) read() {
	defer close(s.events)
	sc := bufio.NewScanner(s.res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				s.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.res.Body.Close()
}

// await reads until want accepts what came (ok false: the stream ended), within 10 s.
func (s *sseStream) await(what string, want func(ev sseEvent, ok bool) bool) sseEvent {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if want(ev, ok) {
				return ev
			}
			if !ok {
				s.t.Fatalf("the stream ended before %s", what)
			}
		case <-deadline:
			s.t.Fatalf("no %s within 10 s", what)
		}
	}
}

// next returns the next event, skipping comments.
func (s *sseStream) next() sseEvent {
	s.t.Helper()
	return s.await("event", func(ev sseEvent, ok bool) bool { return ok && ev.comment == "" })
}

// comment returns the next comment line's text.
func (s *sseStream) comment() string {
	s.t.Helper()
	return s.await("comment", func(ev sseEvent, ok bool) bool { return ok && ev.comment != "" }).comment
}

// ends waits for the server to end the stream.
func (s *sseStream) ends() {
	s.t.Helper()
	s.await("the end of the stream", func(_ sseEvent, ok bool) bool { return !ok })
}

// quiet checks that no event comes for a moment (comments aside).
func (s *sseStream) quiet(d time.Duration) {
	s.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if ok && ev.comment == "" {
				s.t.Fatalf("unexpected event %+v", ev)
			}
		case <-deadline:
			return
		}
	}
}

// streamStatus opens a stream and answers its status without reading a stream that
// started (a 200 would never end): a test that expects a refusal fails instead of hanging.
func (e *env) streamStatus(key, query string, headers ...string) int {
	e.t.Helper()
	res := e.requestStream(context.Background(), key, query, headers...)
	res.Body.Close()
	return res.StatusCode
}

// requestStream sends GET /v1/events with the key and headers (name, value, ...).
func (e *env) requestStream(ctx context.Context, key, query string, headers ...string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/v1/events"+query, nil)
	qt.Assert(e.t, err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	qt.Assert(e.t, err, qt.IsNil)
	return res
}
