package server

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/membuf/membuf/cas/access"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
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
// --max-connections back. Anonymous connections are held by
// connPerClient alone.
//
// It is a stats.Handler, to learn when a connection starts and ends (the
// context of its RPCs descends from the one TagConn returns), and a pair of
// interceptors, to see the RPCs' credentials.
type identityConns struct {
	access *access.Control
	max    int
	close  func(remote net.Addr) // closes the accepted connection from remote
	log    *slog.Logger

	mu     sync.Mutex
	byName map[string]int // connections counted per identity
}

// connIdentity is one connection's: the identity it counts for, once an
// RPC has shown one.
type connIdentity struct {
	remote  net.Addr
	mu      sync.Mutex
	name    string // "": none yet (anonymous so far)
	refused error  // not nil: its identity was past the limit; every RPC's answer
}

// refusedConnGrace is how long a connection refused for its identity stays
// open: for its RPC's status to reach the client.
const refusedConnGrace = time.Second

type connIdentityKey struct{}

// newIdentityConns returns the limit of n connections per identity of
// control (nil: no identities, no limit), closing refused connections with
// close.
func newIdentityConns(control *access.Control, n int, close func(net.Addr), log *slog.Logger) *identityConns {
	return &identityConns{access: control, max: n, close: close, log: log, byName: make(map[string]int)}
}

// serverOptions are the gRPC server's options that install the limit.
func (l *identityConns) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StatsHandler(l),
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
	c, _ := ctx.Value(connIdentityKey{}).(*connIdentity)
	if c == nil || l.access == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.name != "" || c.refused != nil {
		return c.refused
	}
	// Who, not what: the service checks what the RPC may do.
	id, _ := l.access.AuthorizeAny(access.GRPCCredentials(ctx))
	if !id.Authenticated() {
		return nil
	}
	l.mu.Lock()
	n := l.byName[id.Name]
	if n >= l.max {
		l.mu.Unlock()
		l.log.Warn("connection refused: its identity has as many open as --max-connections-per-client allows", "identity", id.Name, "open", n, "peer", c.remote)
		remote := c.remote
		time.AfterFunc(refusedConnGrace, func() { l.close(remote) })
		c.refused = status.Errorf(codes.ResourceExhausted, "%s has %d connections open, the most one client may (--max-connections-per-client): use fewer", id, n)
		return c.refused
	}
	l.byName[id.Name] = n + 1
	l.mu.Unlock()
	c.name = id.Name
	return nil
}

// TagConn gives a connection's context its connIdentity.
func (l *identityConns) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connIdentityKey{}, &connIdentity{remote: info.RemoteAddr})
}

// HandleConn counts a connection's end for the identity it counted for.
func (l *identityConns) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ended := s.(*stats.ConnEnd); !ended {
		return
	}
	c, _ := ctx.Value(connIdentityKey{}).(*connIdentity)
	if c == nil {
		return
	}
	c.mu.Lock()
	name := c.name
	c.name = "" // counted once
	c.mu.Unlock()
	if name == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byName[name]--; l.byName[name] <= 0 {
		delete(l.byName, name)
	}
}

// TagRPC and HandleRPC: nothing per RPC.
func (l *identityConns) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (l *identityConns) HandleRPC(context.Context, stats.RPCStats)                       {}
