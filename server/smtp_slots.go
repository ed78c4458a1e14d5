package server

// Fair SMTP slots. One client must not be able to hold the listener's connections and shut
// everybody else's mail out, so:
//
//   - a client may hold at most MaxPerAddress connections. A client is an IPv4 address, or
//     an IPv6 /64: a host, or one customer of a provider, is normally given a whole /64, so
//     counting single IPv6 addresses would let it open the limit 2^64 times. Loopback counts
//     like any other address.
//   - a session lasts at most MaxSession. At that moment a session waiting for a command
//     is closed with 421; a message whose data is arriving may finish, and gets its answer
//     (then the 421), but only within one more IdleTimeout: trickling data must not hold
//     a slot either. So no connection lives longer than MaxSession + IdleTimeout (15
//     minutes by default). A sender cut off retries in a new session; RFC 5321 section
//     3.8 has every client expect 421 at any time.
//   - IdleTimeout runs from the last progress (a sender, a recipient or message data
//     accepted). go-smtp moves the read deadline forward on every command, NOOP included,
//     and NOOP never reaches the backend, so the connection clamps every read deadline
//     to what the limits allow.
//
// The limits close a session with 421 4.4.2: RFC 3463 defines X.4.2 "bad connection" for
// a connection that could not complete the transaction "because of time-out", and senders
// take it as "retry later", which is what we want of both. A client over its share of the
// slots gets 421 4.7.0, a policy refusal, like one over the listener's limit.

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/emersion/go-smtp"
)

// Replies of the slot limits.
var (
	errTooManyConns = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0},
		Message: "Too many connections; try again later"}
	errTooManyFromAddr = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0},
		Message: "Too many connections from your address; try again later"}
	errSessionTooLong = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2},
		Message: "Session time limit reached; reconnect to send more"}
	errNoProgress = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 2},
		Message: "Idle timeout: no mail transaction progress; closing connection"}
)

// replyLine is e as the line of a reply.
func replyLine(e *smtp.SMTPError) string {
	return fmt.Sprintf("%d %d.%d.%d %s\r\n", e.Code, e.EnhancedCode[0], e.EnhancedCode[1], e.EnhancedCode[2], e.Message)
}

// refuse answers c with e and closes it, without holding up the accept loop for a client
// that does not read.
func refuse(c net.Conn, e *smtp.SMTPError) {
	go func() {
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, replyLine(e))
		c.Close()
	}()
}

// takeAddr counts one more connection of client, unless it holds its share already.
func (s *SMTP) takeAddr(client netip.Prefix) bool {
	if !client.IsValid() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perAddr[client] >= s.cfg.MaxPerAddress {
		return false
	}
	s.perAddr[client]++
	return true
}

// freeAddrLocked counts one connection of client less; s.mu is held.
func (s *SMTP) freeAddrLocked(client netip.Prefix) {
	if !client.IsValid() {
		return
	}
	if s.perAddr[client]--; s.perAddr[client] <= 0 {
		delete(s.perAddr, client)
	}
}

// newSlotConn starts the clock of an accepted connection.
func newSlotConn(c net.Conn, cfg SMTPConfig) *slotConn {
	now := time.Now()
	return &slotConn{Conn: c, start: now, lastProgress: now, idle: cfg.IdleTimeout, maxSession: cfg.MaxSession}
}

// attach records the session's connection: the reply that ends a session is written
// through it (it is the TLS connection after STARTTLS).
func (c *slotConn) attach(owner *smtp.Conn) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.owner = owner
	c.mu.Unlock()
}

// progress restarts the idle timeout: the session moved a mail transaction forward. The
// next read deadline go-smtp sets is allowed that much later.
func (c *slotConn) progress() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.lastProgress = time.Now()
	c.mu.Unlock()
}

// nudge makes a connection that waits for a command time out now (shutdown); a session
// inside DATA is left to finish.
func (c *slotConn) nudge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.busy {
		c.Conn.SetReadDeadline(time.Now())
	}
}

// SetReadDeadline sets t, or the latest deadline the session's limits allow if that is
// earlier: go-smtp asks for IdleTimeout from every command it reads.
func (c *slotConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setReadDeadlineLocked(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline, so the read part is clamped too.
func (c *slotConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *slotConn) setReadDeadlineLocked(t time.Time) error {
	if latest, ok := c.latestLocked(); ok && (t.IsZero() || latest.Before(t)) {
		t = latest
	}
	return c.Conn.SetReadDeadline(t)
}

// latestLocked is the latest read deadline the limits allow: inside a transfer, the end
// of the grace after the session's time; otherwise the end of the idle timeout or of the
// session's time, whichever comes first. It reports false when no limit is set (a
// slotConn made by hand in a test).
func (c *slotConn) latestLocked() (time.Time, bool) {
	if c.busy {
		if c.maxSession <= 0 {
			return time.Time{}, false
		}
		return c.start.Add(c.maxSession + c.idle), true
	}
	var latest time.Time
	if c.idle > 0 {
		latest = c.lastProgress.Add(c.idle)
	}
	if end := c.start.Add(c.maxSession); c.maxSession > 0 && (latest.IsZero() || end.Before(latest)) {
		latest = end
	}
	return latest, !latest.IsZero()
}

// limitLocked is the limit the session has reached by now, if any.
func (c *slotConn) limitLocked(now time.Time) *smtp.SMTPError {
	switch {
	case c.maxSession > 0 && !now.Before(c.start.Add(c.maxSession)):
		return errSessionTooLong
	case c.idle > 0 && !now.Before(c.lastProgress.Add(c.idle)):
		return errNoProgress
	}
	return nil
}

// timedOut answers a read that met its deadline (err). When a limit of the session set
// that deadline, the session ends and the client is told which limit, in words:
//
//   - inside a transfer, the reply goes up through the message reader as the error, so
//     the message is not stored and go-smtp answers it with this 421, a temporary failure
//     the sender retries (a bare timeout would reach it as a permanent 554);
//   - between commands, the reply is written here, through the session's connection, and
//     the read ends as if the client had hung up, so go-smtp closes without adding its
//     own "Idle timeout" reply.
//
// Any other deadline (the shutdown nudge), or one before the client said EHLO (there is
// no session connection to write through yet: after a STARTTLS, writing here would not
// be encrypted), is go-smtp's to answer: 421 4.4.2 "Idle timeout".
func (c *slotConn) timedOut(err error) error {
	c.mu.Lock()
	reply := c.limitLocked(time.Now())
	busy, owner := c.busy, c.owner
	if reply == nil || (!busy && owner == nil) {
		c.mu.Unlock()
		return err
	}
	c.ended.Store(true)
	c.mu.Unlock()
	// Whatever of a message arrived is not the whole message (see Data).
	c.hungUp.Store(true)
	if busy {
		return reply
	}
	io.WriteString(owner.Conn(), replyLine(reply))
	return io.EOF
}
