package server

import (
	"context"
	"net/http"
	"time"

	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// identityConns holds an authenticated client to --max-connections-per-
// client connections of each listener (gRPC's, the HTTP cache's) whatever
// addresses it connects from, as connPerClient holds an address: a
// connection counts for the identity its first authenticated request
// carries (a client certificate's name, or a basic-auth user), and one
// that would take an identity past the limit has that request, and any
// after it, refused (RESOURCE_EXHAUSTED, or 429, naming the limit) and is
// closed a moment later (refusedConnGrace: closed at once, the answer
// would not reach the client), giving its slot of --max-connections back.
// Anonymous connections are held by their address alone.
//
// The counts are connPerClient's, which sees every connection open and
// close; a request's connection is found by its peer's address. (A gRPC
// stats.Handler would say when a connection ends too, but makes grpc-go
// build stats for every message: not on the data path.)
type identityConns struct {
	access      *access.Control // nil: no identities
	grpc, cache *connPerClient  // nil: that listener is not limited
}

// refusedConnGrace is how long a connection refused for its identity stays
// open: for its RPC's status to reach the client.
const refusedConnGrace = time.Second

// serverOptions are the gRPC server's options that install the limit:
// none where no one can authenticate.
func (l *identityConns) serverOptions() []grpc.ServerOption {
	if l == nil || l.access == nil || l.grpc == nil {
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
// identity the RPC carries, or refuses the RPC (admitConn).
func (l *identityConns) admit(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	return admitConn(l.grpc, p.Addr.String(), func() access.Identity {
		id, _ := l.access.AuthorizeAny(access.GRPCCredentials(ctx))
		return id
	})
}

// handler is h with the HTTP cache's requests admitted as admit admits
// RPCs: a refused one is answered 429, its connection closed.
func (l *identityConns) handler(h http.Handler) http.Handler {
	if l == nil || l.access == nil || l.cache == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := admitConn(l.cache, r.RemoteAddr, func() access.Identity {
			id, _ := l.access.AuthorizeAny(access.HTTPCredentials(r))
			return id
		})
		if err != nil {
			w.Header().Set("Connection", "close")
			http.Error(w, status.Convert(err).Message(), http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admitConn counts the connection of cl from remote for the identity
// identify finds in its request, if it counts for none yet, or refuses the
// request and closes the connection if that identity holds its limit
// already.
func admitConn(cl *connPerClient, remote string, identify func() access.Identity) error {
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
	// Who, not what: the service checks what the request may do. Outside
	// the lock: a password's first check takes a bcrypt.
	id := identify()
	if !id.Authenticated() {
		return nil
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if sc.identity != "" || sc.refused != nil || cl.conns[remote] != sc {
		return sc.refused // another request on it got here first, or it closed
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
