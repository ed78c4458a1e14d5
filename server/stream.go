package server

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/inboxd/inboxd/mail/events"
)

// stream writes Server-Sent Events to one client.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// write writes one event or comment, with a deadline of its own: a client that stops
// reading ends its stream instead of holding it.
func (st *stream) write(s string) error {
	st.rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
	_, err := io.WriteString(st.w, s)
	return err
}

func (st *stream) flush() error { return st.rc.Flush() }

// event writes one event; the caller set the write deadline (a page of events shares
// one). The payload is written as it is, not copied into a formatted string: every open
// stream writes every event of its account.
func (st *stream) event(it *events.Item) error {
	buf := make([]byte, 0, 64)
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, it.Seq, 10)
	buf = append(append(append(buf, "\nevent: "...), it.Type...), "\ndata: "...)
	if _, err := st.w.Write(buf); err != nil {
		return err
	}
	if _, err := st.w.Write(it.Data); err != nil {
		return err
	}
	_, err := io.WriteString(st.w, "\n\n")
	return err
}

// pump sends the subscription's events until the client leaves, a write fails, the key
// stops working (keyGone) or the server shuts down. It sleeps between wakes: the hub's
// and the keep-alive's.
func (s *Server) pump(r *http.Request, st *stream, sub *events.Sub, keyGone <-chan struct{}) {
	ctx := r.Context()
	keep := time.NewTicker(s.events.keepAlive)
	defer keep.Stop()
	for {
		if err := s.drain(r, st, sub); err != nil {
			return
		}
		select {
		case <-sub.C():
		case <-keep.C:
			if st.write(": keep-alive\n\n") != nil || st.flush() != nil {
				return
			}
		case <-keyGone:
			return // revoked, expired, or the account disabled
		case <-ctx.Done():
			return
		case <-s.events.ending:
			return
		}
	}
}

// drain writes what the subscription has, flushing after each page.
func (s *Server) drain(r *http.Request, st *stream, sub *events.Sub) error {
	for {
		items, err := sub.Next(r.Context(), streamPage)
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Error("event stream: reading events", "err", err)
			}
			return err
		}
		if len(items) == 0 {
			return nil
		}
		st.rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
		for _, it := range items {
			if err := st.event(it); err != nil {
				return err
			}
		}
		if err := st.flush(); err != nil {
			return err
		}
	}
}

// Unwrap lets http.ResponseController reach the connection beneath (flushes and
// deadlines of streams and waits).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
