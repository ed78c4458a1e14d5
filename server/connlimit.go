package server

import (
	"container/list"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
)

// DefaultHTTPMaxConnections is the HTTP connection cap when none is configured
// (--http-max-connections): far more than the clients of one server keep open, and at a
// few tens of kilobytes each, a few tens of megabytes when every slot is taken.
const DefaultHTTPMaxConnections = 1000

// FitHTTPMaxConnections lowers a connection cap to half of nofile, the process's limit of
// open files (0: unknown), so that the other half stays for the database, the search
// index, the SMTP listener and outbound connections, however many HTTP clients come. Go
// has already raised the soft limit to the hard one at start. It reports whether it
// lowered the cap.
func FitHTTPMaxConnections(want int, nofile uint64) (int, bool) {
	if nofile == 0 || uint64(want) <= nofile/2 {
		return want, false
	}
	return int(max(1, nofile/2)), true
}

// ConnLimit caps the open connections of an HTTP server, so that a crowd of clients, idle
// or not, cannot use up the process's file descriptors. At the cap the oldest idle
// keep-alive connection is closed to make room (like nginx and Envoy do: its client only
// pays a new handshake on its next request); when none is idle the server stops accepting
// and new clients wait in the kernel's backlog until a connection ends or goes idle. So
// idle connections never keep a client out, as they would behind a plain counting
// listener until their idle timeout.
//
// Use: serve Listener(ln) with ConnState set as the server's ConnState hook.
type ConnLimit struct {
	max int

	mu         sync.Mutex
	slotFree   *sync.Cond // a connection closed or went idle
	open       int
	idle       list.List // *limitedConn, longest idle first
	peak       int
	waits      uint64 // times Accept waited with every slot busy
	closedIdle uint64 // idle connections closed to make room
}

// NewConnLimit returns a cap of max open connections (at least 1).
func NewConnLimit(max int) *ConnLimit {
	l := &ConnLimit{max: max}
	if l.max < 1 {
		l.max = 1
	}
	l.slotFree = sync.NewCond(&l.mu)
	return l
}

// Listener wraps ln: its Accept takes a slot first, then a connection.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

// ConnState is the http.Server hook that tells the cap which connections are idle.
func (l *ConnLimit) ConnState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.idleAt != nil {
		l.idle.Remove(lc.idleAt)
		lc.idleAt = nil
	}
	if state == http.StateIdle && !lc.closed {
		lc.idleAt = l.idle.PushBack(lc)
		l.slotFree.Signal()
	}
}

// acquire takes a slot for the next connection of ln, closing the longest idle
// connection when every slot is taken, or waiting until one frees when none is idle.
func (l *ConnLimit) acquire(ln *limitedListener) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	waited := false
	for {
		switch {
		case ln.closed:
			return net.ErrClosed
		case l.open < l.max:
			l.open++
			l.peak = max(l.peak, l.open)
			return nil
		case l.idle.Len() > 0:
			c := l.idle.Remove(l.idle.Front()).(*limitedConn)
			c.idleAt = nil
			l.closedIdle++
			l.mu.Unlock()
			c.Close() // frees the slot
			l.mu.Lock()
		default:
			if !waited {
				waited = true
				l.waits++
			}
			l.slotFree.Wait()
		}
	}
}

// release gives back c's slot, once.
func (l *ConnLimit) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.idleAt != nil {
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	l.free()
}

// free gives back a slot; l.mu is held.
func (l *ConnLimit) free() {
	l.open--
	l.slotFree.Signal()
}

// write prints the cap's gauges and counters for /metrics.
func (l *ConnLimit) write(b *strings.Builder) {
	l.mu.Lock()
	open, idle, peak, waits, closedIdle := l.open, l.idle.Len(), l.peak, l.waits, l.closedIdle
	l.mu.Unlock()
	header(b, "inboxd_http_connections", "gauge", "Open HTTP connections: idle (keep-alive, between requests) and active (the rest).")
	fmt.Fprintf(b, "inboxd_http_connections{state=\"active\"} %d\n", open-idle)
	fmt.Fprintf(b, "inboxd_http_connections{state=\"idle\"} %d\n", idle)
	header(b, "inboxd_http_connections_limit", "gauge", "The cap on open HTTP connections (--http-max-connections).")
	fmt.Fprintf(b, "inboxd_http_connections_limit %d\n", l.max)
	header(b, "inboxd_http_connections_peak", "gauge", "The most HTTP connections open at once since start.")
	fmt.Fprintf(b, "inboxd_http_connections_peak %d\n", peak)
	header(b, "inboxd_http_connections_idle_closed_total", "counter", "Idle keep-alive connections closed to make room at the cap.")
	fmt.Fprintf(b, "inboxd_http_connections_idle_closed_total %d\n", closedIdle)
	header(b, "inboxd_http_connection_waits_total", "counter", "Times every HTTP connection slot was in use with none idle: new clients waited in the kernel's backlog.")
	fmt.Fprintf(b, "inboxd_http_connection_waits_total %d\n", waits)
}

// limitedListener accepts only with a slot of its cap in hand.
type limitedListener struct {
	net.Listener
	l      *ConnLimit
	closed bool // guarded by l.mu
}

func (ln *limitedListener) Accept() (net.Conn, error) {
	if err := ln.l.acquire(ln); err != nil {
		return nil, err
	}
	c, err := ln.Listener.Accept()
	if err != nil {
		ln.l.mu.Lock()
		ln.l.free()
		ln.l.mu.Unlock()
		return nil, err
	}
	return &limitedConn{Conn: c, l: ln.l}, nil
}

// Close stops accepting, waking an Accept that waits for a slot.
func (ln *limitedListener) Close() error {
	ln.l.mu.Lock()
	ln.closed = true
	ln.l.slotFree.Broadcast()
	ln.l.mu.Unlock()
	return ln.Listener.Close()
}

// limitedConn holds a slot until it is closed.
type limitedConn struct {
	net.Conn
	l      *ConnLimit
	idleAt *list.Element // in l.idle while idle; guarded by l.mu
	closed bool          // guarded by l.mu
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close() // the descriptor goes before the slot is given back
	c.l.release(c)
	return err
}
