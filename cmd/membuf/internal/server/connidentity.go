package server

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/internal/connlimit"
	"github.com/membuf/membuf/internal/lograte"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// identityConns holds an authenticated client to --max-connections-per-
// client connections of each listener (gRPC's, the HTTP cache's) whatever
// addresses it connects from, as connlimit.PerClient holds an address: a
// connection counts for the identity its first authenticated request
// carries (a client certificate's name, or a basic-auth user), and one
// that would take an identity past the limit has that request, and any
// after it, refused (RESOURCE_EXHAUSTED, or 429, naming the limit) and is
// closed a moment later (connlimit.RefusedGrace: closed at once, the
// answer would not reach the client), giving its slot of
// --max-connections back.
// Anonymous connections are held by their address alone.
//
// The counts are connlimit.PerClient's, which sees every connection open and
// close; a request's connection is found by its peer's address. (A gRPC
// stats.Handler would say when a connection ends too, but makes grpc-go
// build stats for every message: not on the data path.)
type identityConns struct {
	access      *access.Control      // nil: no identities
	grpc, cache *connlimit.PerClient // nil: that listener is not limited
}

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
// identity the RPC carries, or refuses the RPC (RESOURCE_EXHAUSTED).
func (l *identityConns) admit(ctx context.Context) error {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return nil
	}
	err := l.grpc.Admit(p.Addr.String(), func() (string, string) {
		return identityOf(l.access.AuthorizeAny(access.GRPCCredentials(ctx)))
	})
	if err != nil {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return nil
}

// identityOf is who, not what (the service checks what the request may
// do), as connlimit.PerClient.Admit counts it: the name and how a refusal
// shows it; "" for an anonymous client.
func identityOf(id access.Identity, _ *access.Denial) (name, shown string) {
	if !id.Authenticated() {
		return "", ""
	}
	return id.Name, id.String()
}

// handler is h with the HTTP cache's requests admitted as admit admits
// RPCs: a refused one is answered 429, its connection closed.
func (l *identityConns) handler(h http.Handler) http.Handler {
	if l == nil || l.access == nil || l.cache == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := l.cache.Admit(r.RemoteAddr, func() (string, string) {
			return identityOf(l.access.AuthorizeAny(access.HTTPCredentials(r)))
		})
		if err != nil {
			w.Header().Set("Connection", "close")
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// limitPerClient puts gRPC's and the HTTP cache's listeners under
// --max-connections-per-client (0: three quarters of --max-connections,
// so that one address leaves the others at least a quarter), over
// --max-connections' limit, refusals logged at most once a second.
func (s *Server) limitPerClient() {
	n := s.cfg.Listen.MaxConnectionsPerClient
	if n == 0 {
		n = s.cfg.Listen.MaxConnections - s.cfg.Listen.MaxConnections/4
	}
	log := slog.New(lograte.New(s.log.Handler(), slog.LevelWarn))
	s.identityConns = &identityConns{access: s.cfg.Access}
	s.lis.grpc = connlimit.LimitPerClient(s.lis.grpc, n, log)
	s.identityConns.grpc, _ = s.lis.grpc.(*connlimit.PerClient)
	if s.lis.cache != nil {
		s.lis.cache = connlimit.LimitPerClient(s.lis.cache, n, log)
		s.identityConns.cache, _ = s.lis.cache.(*connlimit.PerClient)
	}
}
