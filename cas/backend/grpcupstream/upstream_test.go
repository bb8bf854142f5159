package grpcupstream_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/membuf/membuf/cas/access"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
)

// upstreamServer is a membuf REAPI server as membuf serve runs one (a
// reapi.Server over a disk store, on a gRPC server made with
// reapi.ServerOptions), on a loopback port, that a test can stop and start
// again on the same port over the same directory (an outage). It counts
// the calls it is sent, by method.
type upstreamServer struct {
	t    *testing.T
	dir  string
	addr string
	cfg  serverConfig

	g     *grpc.Server
	srv   *reapi.Server
	store *disk.Store

	mu    sync.Mutex
	calls map[string]int
}

type serverConfig struct {
	tls           *tls.Config
	access        *access.Control
	maxBatchBytes int64
}

func startUpstream(t *testing.T, cfg serverConfig) *upstreamServer {
	t.Helper()
	u := &upstreamServer{t: t, dir: t.TempDir(), addr: "127.0.0.1:0", cfg: cfg, calls: map[string]int{}}
	u.start()
	t.Cleanup(u.stop)
	return u
}

// start serves on u.addr (the same port again after stop).
func (u *upstreamServer) start() {
	t := u.t
	t.Helper()
	store, err := disk.OpenStore(u.dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := reapi.NewServer(store, reapi.Options{Access: u.cfg.access, MaxBatchBytes: u.cfg.maxBatchBytes})
	if err != nil {
		t.Fatal(err)
	}
	opts := append(reapi.ServerOptions(nil),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			u.count(info.FullMethod)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			u.count(info.FullMethod)
			return h(srv, ss)
		}))
	if u.cfg.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(u.cfg.tls)))
	}
	g := grpc.NewServer(opts...)
	srv.Register(g)
	lis, err := net.Listen("tcp", u.addr)
	if err != nil {
		t.Fatal(err)
	}
	u.addr = lis.Addr().String()
	go g.Serve(lis)
	u.g, u.srv, u.store = g, srv, store
}

// stop stops serving and closes the store; stop again does nothing.
func (u *upstreamServer) stop() {
	if u.g == nil {
		return
	}
	u.g.Stop()
	u.srv.Close()
	if err := u.store.Close(); err != nil {
		u.t.Errorf("closing the upstream's store: %v", err)
	}
	u.g = nil
}

func (u *upstreamServer) count(method string) {
	u.mu.Lock()
	u.calls[method]++
	u.mu.Unlock()
}

// callCounts returns the calls counted so far and starts counting again.
func (u *upstreamServer) callCounts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := u.calls
	u.calls = map[string]int{}
	return c
}
