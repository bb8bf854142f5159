package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/reapi"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

// testConfig is a server on a free loopback port with no HTTP listener,
// its store in dir, and nothing that runs in the background.
func testConfig(dir string) server.Config {
	return server.Config{
		Listen: server.ListenConfig{GRPC: "127.0.0.1:0", MaxConnections: 16},
		Store:  server.StoreConfig{Dir: dir, MaxSize: 64 << 20, CheckReads: true},
		Limits: server.LimitsConfig{
			ChunkSize:      64 << 10,
			MaxBatchSize:   reapi.DefaultMaxBatchBytes,
			UploadTTL:      time.Minute,
			UploadStall:    time.Minute,
			MaxOpenUploads: 8,
			MaxKeptUploads: 8,
		},
		Asset:   server.AssetConfig{Timeout: time.Minute},
		Observe: server.ObserveConfig{Logger: slog.New(slog.DiscardHandler)},
		Stop:    server.StopConfig{Timeout: 5 * time.Second},
	}
}

// runServer runs a server for cfg until the test ends or the returned
// stop is called, and returns once it serves.
func runServer(t *testing.T, cfg server.Config) (sv server.Serving, stop func() error) {
	t.Helper()
	ready := make(chan server.Serving, 1)
	cfg.Observe.Ready = func(sv server.Serving) error {
		ready <- sv
		return nil
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	select {
	case sv = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Run returned %v before serving", err)
	}
	t.Cleanup(func() { stop() })
	return sv, stop
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Run returns only once the store is closed: its directory is free for
// the next server, and the port too.
func TestRunClosesTheStoreAndListenersBeforeItReturns(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Listen.GRPC = freeAddr(t)
	sv, stop := runServer(t, cfg)
	if sv.GRPC != cfg.Listen.GRPC || sv.Line != "listening grpc="+cfg.Listen.GRPC || sv.HTTP != "" {
		t.Errorf("Serving = %+v; want grpc at %s and no HTTP", sv, cfg.Listen.GRPC)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	store, err := disk.OpenStore(dir, 64<<20, nil)
	if err != nil {
		t.Fatalf("the store's directory after Run returned: %v", err)
	}
	store.Close()
	l, err := net.Listen("tcp", cfg.Listen.GRPC)
	if err != nil {
		t.Fatalf("the gRPC port after Run returned: %v", err)
	}
	l.Close()
}

// A start that fails halfway stops what it had started: a store that
// another server holds fails the start after the listeners were bound,
// and they are closed when Run returns.
func TestRunStopsWhatAFailedStartStarted(t *testing.T) {
	dir := t.TempDir()
	runServer(t, testConfig(dir))

	cfg := testConfig(dir)
	cfg.Listen.GRPC = freeAddr(t)
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, disk.ErrLocked) {
		t.Fatalf("Run on a store another server holds: %v; want %v", err, disk.ErrLocked)
	}
	l, err := net.Listen("tcp", cfg.Listen.GRPC)
	if err != nil {
		t.Fatalf("the gRPC port the failed start had bound: %v", err)
	}
	l.Close()
}

// An error from Ready stops the server, as a listener's failure does, and
// Run returns it.
func TestRunStopsWhenReadyFails(t *testing.T) {
	cfg := testConfig(t.TempDir())
	failed := errors.New("ready failed")
	cfg.Observe.Ready = func(server.Serving) error { return failed }
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, failed) {
		t.Fatalf("Run = %v; want %v", err, failed)
	}
}
