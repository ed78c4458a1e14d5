package server

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ParseTrustedProxies reads the addresses of --trusted-proxy: IP addresses and CIDR
// prefixes, such as 127.0.0.1 or 10.0.0.0/8. A request from one of them may say whose it
// is in X-Forwarded-For; a request from anywhere else may not.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, unmapPrefix(p))
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix such as 10.0.0.0/8", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// unmapPrefix turns ::ffff:10.0.0.0/104 into 10.0.0.0/8, so that it matches the IPv4
// addresses clientAddr returns, and drops the host bits.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() {
		a, bits = a.Unmap(), max(0, bits-96)
	}
	return netip.PrefixFrom(a, bits).Masked()
}

// clientAddr is the address of the client that sent r: its peer, unless the peer is a
// trusted proxy; then, walking X-Forwarded-For from the right (each proxy appends the
// address it was sent from), the first address that is not a trusted proxy. Entries to the
// left of that one were written by the client and are not believed. An entry that does
// not parse ends the walk at the last address read. The zero Addr means the peer's
// address could not be read.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	addr := parseHostAddr(r.RemoteAddr)
	if !s.trusted(addr) {
		return addr
	}
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		rest := values[i]
		for rest != "" {
			entry := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				entry, rest = rest[j+1:], rest[:j]
			} else {
				rest = ""
			}
			if strings.TrimSpace(entry) == "" {
				continue
			}
			next := parseHostAddr(strings.TrimSpace(entry))
			if !next.IsValid() {
				return addr
			}
			addr = next
			if !s.trusted(addr) {
				return addr
			}
		}
	}
	return addr // every hop was a trusted proxy: the left-most is the client
}

// trusted reports whether a is one of the --trusted-proxy addresses.
func (s *Server) trusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHostAddr reads "192.0.2.1", "192.0.2.1:4711", "2001:db8::1" or "[2001:db8::1]:4711"
// (proxies write X-Forwarded-For entries in all of these forms); an IPv4 address written
// as IPv6 is returned as IPv4, without a zone.
func parseHostAddr(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone("")
}

// remoteText is how the audit log writes a client address.
func remoteText(a netip.Addr, r *http.Request) string {
	if !a.IsValid() {
		return r.RemoteAddr
	}
	return a.String()
}
