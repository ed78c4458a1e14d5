package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/events"
)

// StreamConfig tunes the live event stream and the waits for mail (extensions sections
// 4 and 5). The zero value is the contract's defaults with a hub of the server's own.
type StreamConfig struct {
	// Hub follows the event log for this process (nil: the server runs its own until
	// Close). main shares one with whatever else reads events.
	Hub *events.Hub
	// KeepAlive is how often an idle stream gets a comment line (0: 15 s, the contract's
	// bound), so that proxies and clients see the connection alive.
	KeepAlive time.Duration
	// Reauth is how often the keys of open streams are checked again (0: 5 s): a key
	// revoked or expired while streaming ends its streams well within the contract's 10 s.
	Reauth time.Duration
}

// streamWriteWait is how long one write to a stream may take before the client counts
// as gone: a stalled reader must not hold the stream forever.
const streamWriteWait = 30 * time.Second

// streamPage is how many events a stream takes from its subscription at once.
const streamPage = 100

// streamGather is the least time between two pages of a stream while events flow: a page
// costs the connection a few writes (the chunked framing's, then a flush) whatever it
// holds, and every open stream writes every event of its account, so one page carries
// the events of a few of the hub's reads instead of one each. The first event after a
// quiet spell goes at once.
const streamGather = 25 * time.Millisecond

// eventsRuntime is what the server keeps for streams and waits.
type eventsRuntime struct {
	hub       *events.Hub
	stop      func() // stops a hub the server runs itself; nil for a shared one
	keepAlive time.Duration
	keys      *keyWatch    // re-checks the keys of open streams
	streams   atomic.Int64 // open streams, for /metrics
	waits     atomic.Int64 // waits in progress, for /metrics
	// ending is closed when the HTTP server shuts down (EndStreams): streams end and
	// waits answer with what they have, so that draining does not wait for them.
	ending  chan struct{}
	endOnce sync.Once
}

func newEventsRuntime(store db.Store, cfg StreamConfig, log *slog.Logger) (*eventsRuntime, error) {
	rt := &eventsRuntime{hub: cfg.Hub, keepAlive: cfg.KeepAlive, ending: make(chan struct{})}
	if rt.keepAlive <= 0 {
		rt.keepAlive = 15 * time.Second
	}
	if cfg.Reauth <= 0 {
		cfg.Reauth = 5 * time.Second
	}
	rt.keys = newKeyWatch(func(ctx context.Context, token string) error {
		_, err := store.Authenticate(ctx, token)
		return err
	}, cfg.Reauth)
	if rt.hub != nil {
		return rt, nil
	}
	hub, err := events.New(context.Background(), store, events.Options{Log: log})
	if err != nil {
		rt.keys.close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hub.Run(ctx); close(done) }()
	rt.hub, rt.stop = hub, func() { cancel(); <-done }
	return rt, nil
}

func (rt *eventsRuntime) close() {
	rt.end()
	rt.keys.close()
	if rt.stop != nil {
		rt.stop()
	}
}

func (rt *eventsRuntime) end() { rt.endOnce.Do(func() { close(rt.ending) }) }

// EndStreams ends the event streams and answers the waits in progress (and any that
// start later) with what they have. Register it with http.Server.RegisterOnShutdown:
// Shutdown waits for requests to finish, and a stream never would.
func (s *Server) EndStreams() { s.events.end() }

// writeMetrics prints the open streams and waits.
func (rt *eventsRuntime) writeMetrics(b *strings.Builder) {
	header(b, "inboxd_event_streams", "gauge", "Open GET /v1/events streams.")
	fmt.Fprintf(b, "inboxd_event_streams %d\n", rt.streams.Load())
	header(b, "inboxd_message_waits", "gauge", "Waits for mail (GET .../messages/wait) in progress.")
	fmt.Fprintf(b, "inboxd_message_waits %d\n", rt.waits.Load())
}

// handleEventsStream serves GET /v1/events (streamEvents): everything that can fail is
// checked before the stream starts, so errors keep the JSON error shape; once the 200 is
// written, the stream only ends.
func (s *Server) handleEventsStream(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := s.eventFilter(r, c)
	if err != nil {
		return err
	}
	after, err := s.streamCursor(r, c)
	if err != nil {
		return err
	}
	token, err := bearerToken(r)
	if err != nil {
		return err
	}
	sub := s.events.hub.Subscribe(f, after)
	defer sub.Close()
	gone, release := s.events.keys.watch(token)
	defer release()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx would otherwise hold events back
	w.WriteHeader(http.StatusOK)
	if isHead(r) {
		return nil
	}
	s.events.streams.Add(1)
	defer s.events.streams.Add(-1)
	// The server's WriteTimeout would cut the stream: each write sets its own deadline
	// instead (stream.write). Its ReadTimeout does not matter once the request is read.
	st := &stream{w: w, rc: http.NewResponseController(w)}
	if err := st.flush(); err == nil {
		s.pump(r, st, sub, gone)
	}
	return nil
}

// eventFilter is the stream's choice of events: the account's, of the inboxes asked
// for (each resolved as the path's inbox is: 404 unknown, 403 beyond a mailbox key), of
// the types asked for.
func (s *Server) eventFilter(r *http.Request, c *call) (db.EventFilter, error) {
	f := db.EventFilter{AccountID: c.who.AccountID, Types: c.queryStrings("types")}
	for _, id := range c.queryStrings("inboxId") {
		in, err := s.resolveInbox(r, c.who, id)
		if err != nil {
			return f, err
		}
		f.Inboxes = append(f.Inboxes, in.ID)
	}
	if c.who.Mailbox && len(f.Inboxes) == 0 {
		f.Inboxes = []int64{c.who.InboxID}
	}
	return f, nil
}

// streamCursor reads where the stream resumes: the Last-Event-ID header (what
// EventSource sends on reconnect, to the same URL, so it wins over the query), else
// lastEventId. Without either it is the log's end as the store has it (the hub may not
// have read the newest events yet), so only events committed later come.
func (s *Server) streamCursor(r *http.Request, c *call) (int64, error) {
	raw, name := c.queryString("lastEventId"), "lastEventId"
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		raw, name = strings.TrimSpace(v), "Last-Event-ID"
	}
	last, expired, err := s.store.EventBounds(r.Context())
	if err != nil || raw == "" {
		return last, err
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 || strings.Trim(raw, "0123456789") != "" {
		return 0, db.Errorf(db.ECodeInvalidArgument, "%s: must be the id of an event this stream sent", name)
	}
	if n > last {
		return 0, db.Errorf(db.ECodeInvalidArgument, "%s: no event has this id", name)
	}
	if n < expired {
		return 0, db.Errorf(db.ECodeCursorExpired, "%s: events after %d are no longer kept (events are kept %d days); start a new stream without it",
			name, n, int(db.EventRetention.Hours()/24))
	}
	return n, nil
}
