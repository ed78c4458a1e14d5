package server

// Fair SMTP slots. One client must not be able to hold the listener's connections and shut
// everybody else's mail out, so a client may hold at most MaxPerAddress connections. A
// client is an IPv4 address, or an IPv6 /64: a host, or one customer of a provider, is
// normally given a whole /64, so counting single IPv6 addresses would let it open the
// limit 2^64 times. Loopback counts like any other address. A client over its share gets
// 421 4.7.0, a policy refusal, like one over the listener's limit.

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

// clientKey is the client a remote address belongs to: an IPv4 address, or the /64 of an
// IPv6 one. It is the zero Prefix, not counted, for an address that is not TCP.
func clientKey(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := ta.AddrPort().Addr().Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
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
