package server

import (
	"net"
	"net/netip"
)

// A client, for every limit counted per client (the SMTP listener's connections, the
// dashboard's login throttle), is an IPv4 address or the /64 of an IPv6 one: a host, or
// one customer of a provider, is normally given a whole /64, so counting single IPv6
// addresses would let one client be 2^64 of them. An IPv4 address written as IPv6
// (::ffff:a.b.c.d) is that IPv4 address.
const ipv6ClientBits = 64

// clientKey is the client of address a; the zero Prefix when a is not valid.
func clientKey(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(ipv6ClientBits)
	return p
}

// connClient is the client of a connection's remote address; the zero Prefix, not
// counted, for an address that is not TCP.
func connClient(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	return clientKey(ta.AddrPort().Addr())
}
