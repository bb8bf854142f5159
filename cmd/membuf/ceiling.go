package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/blobs"
	"github.com/membuf/membuf/cmd/membuf/internal/metrics"
	"github.com/membuf/membuf/cmd/membuf/internal/server"
)

func init() {
	register(&command{
		name:    "ceiling",
		summary: "serve ByteStream Writes received and hashed, never stored, and Reads from memory: the ceiling of bench blobs",
		flags:   ceilingFlags,
	})
}

func ceilingFlags(std *stdio) (*flag.FlagSet, func(context.Context, []string) error) {
	fs := newFlagSet("ceiling", "[flags]",
		"Serve ByteStream Write as cheaply as any server that checks uploads can: each message is\n"+
			"received through gRPC with membuf serve's gRPC settings (its buffer pool, codec and flow-\n"+
			"control windows), its data fed to SHA-256 and dropped; finish_write checks size and hash\n"+
			"and answers. Read sends the size the resource name gives from one static buffer, by\n"+
			"reference (not the blob's bytes: only lengths are checked). Nothing touches a disk.\n"+
			"'membuf bench blobs --config ceiling' starts one and\n"+
			"measures servers against it; run it yourself to measure it with 'bench blobs --addr'.\n"+
			"Prints the same listen line as serve; SIGINT or SIGTERM stops it.")
	listen := fs.String("listen", "127.0.0.1:0", "`address` for gRPC; port 0 picks a free port")
	httpAddr := fs.String("http", "127.0.0.1:0", "`address` for HTTP /metrics and /debug/pprof/; empty disables it")
	return fs, func(ctx context.Context, args []string) error {
		if len(args) > 0 {
			return usageError("unexpected arguments %q: ceiling takes only flags", args)
		}
		return serveCeiling(ctx, *listen, *httpAddr, std)
	}
}

func serveCeiling(ctx context.Context, listen, httpAddr string, std *stdio) error {
	log := slog.New(slog.NewTextHandler(std.err, nil))
	// The same message limit and pool classes as membuf serve's defaults.
	msgSize := server.MaxMessageSize(defaultMaxBatchSize)
	pool, err := membuf.NewPool(membuf.Config{MaxSize: server.PoolMaxSize(msgSize)})
	if err != nil {
		return err
	}
	g := grpc.NewServer(blobs.CeilingServerOptions(pool, msgSize)...)
	bspb.RegisterByteStreamServer(g, &blobs.Ceiling{})
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	line := "listening grpc=" + lis.Addr().String()
	var h *http.Server
	errc := make(chan error, 2)
	if httpAddr != "" {
		hl, err := net.Listen("tcp", httpAddr)
		if err != nil {
			lis.Close()
			return fmt.Errorf("--http: %w", err)
		}
		line += " http=" + hl.Addr().String()
		h = &http.Server{Handler: server.NewHTTPHandler(metrics.NewRuntimeRegistry(), nil, nil, true), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := h.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
	}
	go func() {
		if err := g.Serve(lis); err != nil {
			errc <- fmt.Errorf("grpc: %w", err)
		}
	}()
	fmt.Fprintln(std.out, line)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	server.StopGracefully(g, 10*time.Second, log, h)
	return err
}
