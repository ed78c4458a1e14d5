package server

import (
	"net"
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestClientKey: the per-address limit counts an IPv4 client by its address and an IPv6
// client by its /64 (a host can use any address of its /64), and an IPv4 client that
// arrives on an IPv6 socket is the same client.
func TestClientKey(t *testing.T) {
	key := func(ip string) string {
		return connClient(&net.TCPAddr{IP: net.ParseIP(ip), Port: 25}).String()
	}
	for _, tt := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe"},
		{"192.0.2.7", "::ffff:192.0.2.7"},
		{"127.0.0.1", "127.0.0.1"},
	} {
		qt.Check(t, key(tt.a), qt.Equals, key(tt.b), qt.Commentf("%s and %s are one client", tt.a, tt.b))
	}
	for _, tt := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"192.0.2.7", "192.0.2.8"},
		{"127.0.0.1", "127.0.0.2"},
	} {
		qt.Check(t, key(tt.a), qt.Not(qt.Equals), key(tt.b), qt.Commentf("%s and %s are two clients", tt.a, tt.b))
	}
	qt.Check(t, key("2001:db8:1:2::1"), qt.Equals, "2001:db8:1:2::/64")
	qt.Check(t, connClient(&net.UnixAddr{Name: "/run/smtp.sock"}).IsValid(), qt.IsFalse) // not counted
}
