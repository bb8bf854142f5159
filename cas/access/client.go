package access

import (
	"context"
	"net"
	"net/netip"

	"google.golang.org/grpc/peer"
)

// A server's shared resources (the upload budget, its connections) are
// shared per client, so that one client cannot take them all and starve
// the others. A client is the authenticated caller's name, whatever
// address it connects from, or, for an anonymous caller, the IP address
// it connects from (its port aside: one machine's connections are one
// client).

// Client names the client a request counts as: id's name if it is
// authenticated, otherwise the IP address of remoteAddr (host:port, or a
// bare host).
func Client(id Identity, remoteAddr string) string {
	if id.Authenticated() {
		return "user " + id.Name
	}
	return "address " + AddressClient(remoteAddr)
}

// PeerClient is Client for a caller connected from addr: a TCP address's
// IP is written once, where Client would format host:port and split it
// again (three allocations an upload, not one).
func PeerClient(id Identity, addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok && !id.Authenticated() {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			// Unmap: net.IP writes an IPv4 address held in 16 bytes as IPv4.
			ip = ip.Unmap().WithZone(tcp.Zone)
			var buf [len("address ") + len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%") + 16]byte
			return string(ip.AppendTo(append(buf[:0], "address "...)))
		}
	}
	if addr == nil {
		return Client(id, "")
	}
	return Client(id, addr.String())
}

// AddressClient is the host of remoteAddr (host:port, or a bare host):
// what an anonymous caller counts as.
func AddressClient(remoteAddr string) string {
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}

type clientKey struct{}

// WithClient returns ctx carrying client (Client), for ClientOf.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// ClientOf returns the client a request whose context is ctx counts as:
// the one WithClient put there, else, for a gRPC request, the client of
// its peer's address, else "".
func ClientOf(ctx context.Context) string {
	if c, ok := ctx.Value(clientKey{}).(string); ok {
		return c
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return PeerClient(Identity{}, p.Addr)
	}
	return ""
}
