package blobs

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/blobclient"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/internal/serveprocess"
)

// startProcess starts configuration name (ConfigServe or ConfigCeiling) as a
// process of its own, ConfigServe on a store in dir.
func (o *BlobsOptions) startProcess(ctx context.Context, name, dir string, storeSize int64, chunk int) (*serveprocess.Process, error) {
	switch name {
	case ConfigServe:
		return measure.StartServe(ctx, o.Command, dir, storeSize, chunk, o.ServeFlags...)
	case ConfigCeiling:
		return serveprocess.Start(ctx, o.Command("ceiling", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"))
	}
	return nil, fmt.Errorf("configuration %s does not run as a process", name)
}

// blobServer is a cas server in this process.
type blobServer struct {
	store     *disk.Store
	cas       *reapi.Server
	grpc      *grpc.Server
	addr      string
	completed atomic.Int64 // ByteStream Reads and Writes that succeeded
}

// startBlobServer starts a cas server of configuration config on a store in
// dir. ConfigMembufZeroCopy is wired for the zero-copy path
// (reapi.ServerOptions): pool for read chunks and for gRPC's buffers, and
// membuf's ByteStream codec. ConfigFreshSlice is plain chunk slices, grpc-go's
// default pool and proto codec; ConfigPrepared is the same with Read served
// by preparedRead.
func startBlobServer(dir string, storeSize int64, chunk int, config string, pool *membuf.Pool) (*blobServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	store, err := disk.OpenStore(dir, storeSize, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	opts := reapi.Options{ChunkSize: chunk}
	var serverOpts []grpc.ServerOption
	switch config {
	case ConfigMembufZeroCopy:
		opts.Pool = pool
		// grpcmem's codec, the pool for gRPC's reads, and the marker
		// that turns the handlers' zero-copy path on.
		serverOpts = append(serverOpts, reapi.ServerOptions(pool)...)
	case ConfigPrepared:
		serverOpts = append(serverOpts, grpc.ChainStreamInterceptor(newPreparedRead(store, chunk).intercept))
	}
	srv, err := reapi.NewServer(store, opts)
	if err != nil {
		store.Close()
		return nil, err
	}
	s := &blobServer{store: store, cas: srv}
	// count first, so that it sees the Reads preparedRead serves too.
	serverOpts = append([]grpc.ServerOption{grpc.ChainStreamInterceptor(s.count)}, serverOpts...)
	s.grpc = grpc.NewServer(serverOpts...)
	srv.Register(s.grpc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		return nil, err
	}
	s.addr = lis.Addr().String()
	go s.grpc.Serve(lis)
	return s, nil
}

// count counts the ByteStream Reads and Writes that complete without error.
func (s *blobServer) count(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	if err == nil && (info.FullMethod == blobclient.MethodRead || info.FullMethod == blobclient.MethodWrite) {
		s.completed.Add(1)
	}
	return err
}

func (s *blobServer) close() {
	s.grpc.Stop()
	s.cas.Close()
	s.store.Close()
}
