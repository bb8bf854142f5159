package server

import (
	"context"
	"time"

	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// identityConns holds an authenticated client to --max-connections-per-
// client gRPC connections whatever addresses it connects from, as
// connPerClient holds an address: a connection counts for the identity
// its first authenticated RPC carries (a client certificate's name, or a
// basic-auth user), and one that would take an identity past the limit
// has that RPC, and any after it, refused (RESOURCE_EXHAUSTED, naming the
// limit) and is closed a moment later (refusedConnGrace: closed at once,
// the status would not reach the client), giving its slot of
// --max-connections back. Anonymous connections are held by their address
// alone.
//
// The counts are connPerClient's, which sees every connection open and
// close; the interceptors find an RPC's connection by its peer's address.
// (A stats.Handler would say when a connection ends too, but makes
// grpc-go build stats for every message: not on the data path.)
type identityConns struct {
	access *access.Control // nil: no identities
	lis    *connPerClient
}

// refusedConnGrace is how long a connection refused for its identity stays
// open: for its RPC's status to reach the client.
const refusedConnGrace = time.Second

// serverOptions are the gRPC server's options that install the limit:
// none where no one can authenticate.
func (l *identityConns) serverOptions() []grpc.ServerOption {
	if l == nil || l.access == nil {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := l.admit(ctx); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := l.admit(ss.Context()); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
	}
}

// admit counts the connection of the RPC whose context is ctx for the
// identity the RPC carries, if it counts for none yet, or refuses the RPC
// and closes the connection if that identity holds its limit already.
func (l *identityConns) admit(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	remote := p.Addr.String()
	cl := l.lis
	cl.mu.Lock()
	sc := cl.conns[remote]
	if sc == nil || sc.identity != "" || sc.refused != nil {
		cl.mu.Unlock()
		if sc == nil {
			return nil // not a TCP connection: no address, no count
		}
		return sc.refused
	}
	cl.mu.Unlock()
	// Who, not what: the service checks what the RPC may do. Outside the
	// lock: a password's first check takes a bcrypt.
	id, _ := l.access.AuthorizeAny(access.GRPCCredentials(ctx))
	if !id.Authenticated() {
		return nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if sc.identity != "" || sc.refused != nil || cl.conns[remote] != sc {
		return sc.refused // another RPC on it got here first, or it closed
	}
	if n := cl.byIdentity[id.Name]; n >= cl.max {
		cl.log.Warn("connection refused: its identity has as many open as --max-connections-per-client allows", "identity", id.Name, "open", n, "peer", remote)
		sc.refused = status.Errorf(codes.ResourceExhausted, "%s has %d connections open, the most one client may (--max-connections-per-client): use fewer", id, n)
		conn := sc.Conn
		time.AfterFunc(refusedConnGrace, func() { conn.Close() })
		return sc.refused
	}
	cl.byIdentity[id.Name]++
	sc.identity = id.Name
	return nil
}
