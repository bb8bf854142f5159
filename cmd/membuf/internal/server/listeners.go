package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/membuf/membuf/internal/connlimit"
	"google.golang.org/grpc"
)

// listeners are the server's sockets: gRPC's, and the HTTP and HTTP
// cache listeners' when they are on (nil otherwise), bound but not yet
// served; gRPC's and the cache's limited to --max-connections.
type listeners struct {
	grpc, http, cache net.Listener
}

// bindListeners binds the addresses of --listen, --http and --http-cache
// (TCP, or Unix sockets: unixsocket.go), and closes those it bound if one
// fails.
func bindListeners(c ListenConfig) (_ *listeners, err error) {
	l := &listeners{}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if l.grpc, err = listen(c.GRPC); err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	l.grpc = connlimit.Limit(l.grpc, c.MaxConnections)
	if c.HTTPCache != "" {
		if l.cache, err = listen(c.HTTPCache); err != nil {
			return nil, fmt.Errorf("--http-cache: %w", err)
		}
		l.cache = connlimit.Limit(l.cache, c.MaxConnections)
	}
	if c.HTTP != "" {
		if l.http, err = listen(c.HTTP); err != nil {
			return nil, fmt.Errorf("--http: %w", err)
		}
	}
	return l, nil
}

// close closes every listener bound.
func (l *listeners) close() {
	for _, c := range []net.Listener{l.grpc, l.http, l.cache} {
		if c != nil {
			c.Close()
		}
	}
}

// StopGracefully lets open RPCs and HTTP requests finish for up to timeout,
// then cuts off whatever is left. Servers in hs may be nil.
func StopGracefully(g *grpc.Server, timeout time.Duration, log *slog.Logger, hs ...*http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(done)
	}()
	for _, h := range hs {
		if h != nil {
			if err := h.Shutdown(ctx); err != nil {
				h.Close()
			}
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		log.Warn("graceful stop timed out; closing open RPCs", "timeout", timeout)
		g.Stop()
		<-done
	}
}
