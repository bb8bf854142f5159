package access_test

import (
	"net"
	"testing"

	"github.com/membuf/membuf/cas/access"
)

// PeerClient names a caller as Client does from its address's text: the
// IP alone, however net holds it, or the authenticated name.
func TestPeerClient(t *testing.T) {
	user := access.Identity{Name: "ci", Method: "basic"}
	for _, c := range []struct {
		id   access.Identity
		addr net.Addr
		want string
	}{
		{access.Identity{}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7).To4(), Port: 4000}, "address 10.0.0.7"},
		{access.Identity{}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4000}, "address 10.0.0.7"}, // 16 bytes
		{access.Identity{}, &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443}, "address 2001:db8::1"},
		{access.Identity{}, &net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 443}, "address fe80::1%eth0"},
		{access.Identity{}, &net.UnixAddr{Name: "/run/membuf.sock", Net: "unix"}, "address /run/membuf.sock"},
		{access.Identity{}, nil, "address "},
		{user, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4000}, "user ci"},
	} {
		if got := access.PeerClient(c.id, c.addr); got != c.want {
			t.Errorf("PeerClient(%v, %v) = %q, want %q", c.id, c.addr, got, c.want)
		}
		if c.addr != nil {
			if old := access.Client(c.id, c.addr.String()); old != c.want {
				t.Errorf("Client(%v, %q) = %q, PeerClient %q: the two disagree", c.id, c.addr.String(), old, c.want)
			}
		}
	}
}
