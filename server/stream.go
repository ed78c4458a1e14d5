package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
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

// pageBuffers lend a stream a buffer while it writes a page of events, so that the page
// reaches the connection in a few large writes instead of several small ones per event
// (the response's own buffer holds 4 KiB, less than two payloads); an idle stream holds
// none.
var pageBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// page writes a page of events and flushes it; the caller set the write deadline.
func (st *stream) page(items []*events.Item) error {
	bw := pageBuffers.Get().(*bufio.Writer)
	defer pageBuffers.Put(bw)
	bw.Reset(st.w)
	defer bw.Reset(nil) // not holding the response while pooled
	for _, it := range items {
		writeEvent(bw, it)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return st.flush()
}

// writeEvent writes one event. The payload is written as it is, not copied into a
// formatted string: every open stream writes every event of its account. A failed write
// is kept by bw and reported by its Flush.
func writeEvent(bw *bufio.Writer, it *events.Item) {
	bw.WriteString("id: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), it.Seq, 10))
	bw.WriteString("\nevent: ")
	bw.WriteString(it.Type)
	bw.WriteString("\ndata: ")
	bw.Write(it.Data)
	bw.WriteString("\n\n")
}

// pump sends the subscription's events until the client leaves, a write fails, the key
// stops working (keyGone) or the server shuts down. It sleeps between wakes: the hub's
// (at least streamGather after its last page) and the keep-alive's.
func (s *Server) pump(r *http.Request, st *stream, sub *events.Sub, keyGone <-chan struct{}) {
	ctx := r.Context()
	keep := time.NewTicker(s.events.keepAlive)
	defer keep.Stop()
	var paged time.Time // when the last page was written
	for {
		wrote, err := s.drain(r, st, sub)
		if err != nil {
			return
		}
		if wrote {
			paged = time.Now()
		}
		select {
		case <-sub.C():
			if !s.gatherPage(ctx, paged, keyGone) {
				return
			}
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

// gatherPage waits, after a wake, until streamGather has passed since the last page; false
// when the stream ends meanwhile.
func (s *Server) gatherPage(ctx context.Context, paged time.Time, keyGone <-chan struct{}) bool {
	wait := streamGather - time.Since(paged)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-keyGone:
	case <-ctx.Done():
	case <-s.events.ending:
	}
	return false
}

// drain writes what the subscription has, flushing after each page, and reports whether
// it wrote any.
func (s *Server) drain(r *http.Request, st *stream, sub *events.Sub) (wrote bool, err error) {
	for {
		items, err := sub.Next(r.Context(), streamPage)
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Error("event stream: reading events", "err", err)
			}
			return wrote, err
		}
		if len(items) == 0 {
			return wrote, nil
		}
		st.rc.SetWriteDeadline(time.Now().Add(streamWriteWait))
		if err := st.page(items); err != nil {
			return wrote, err
		}
		wrote = true
	}
}

// Unwrap lets http.ResponseController reach the connection beneath (flushes and
// deadlines of streams and waits).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
