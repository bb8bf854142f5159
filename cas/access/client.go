package access

import (
	"context"
	"net"

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
		return Client(Identity{}, p.Addr.String())
	}
	return ""
}
