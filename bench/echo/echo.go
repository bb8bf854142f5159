// Package echo is the workload of `membuf bench grpc` ([Echo]): payloads
// of fixed sizes echoed through a unary and a streaming gRPC service in
// this process, with grpc-go's default buffer pool or a membuf.Pool
// installed.
package echo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/bench/measure"
	"github.com/membuf/membuf/bench/report"
)

// Echo modes.
const (
	ModeUnary     = "unary"
	ModeStreaming = "streaming"
)

// Configuration names of the echo workload.
const (
	ConfigGRPCDefault = "grpc-default"
	ConfigMembuf      = "membuf"
)

// DefaultEchoSizes are the payloads of grpc-go PR 8770's tables: below and
// above 32 KiB, where grpc-go's default pool moves from its 32 KiB tier to
// its 1 MiB one.
var DefaultEchoSizes = []int64{1, 32000, 33000, 256 << 10}

// EchoOptions configure the echo workload.
type EchoOptions struct {
	Modes  []string // ModeUnary, ModeStreaming; empty means both
	Sizes  []int64  // payload bytes; empty means DefaultEchoSizes
	Bounds measure.Bounds
	// Pool is the membuf pool of the "membuf" configuration; nil means a
	// pool with the default Config.
	Pool     *membuf.Pool
	Progress measure.Progress
}

// Echo measures echoes of payloads of each size through a gRPC service in
// this process, under two configurations:
//
//   - grpc-default: grpc-go as it comes, with its default buffer pool
//     (mem.DefaultBufferPool) everywhere;
//   - membuf: a membuf.Pool installed on the server (experimental.BufferPool),
//     on the client (experimental.WithBufferPool) and as the process default
//     (experimental.SetDefaultBufferPool), the only way to reach the proto
//     codec's marshalling buffers.
//
// The process default is global: Echo switches it before each measured
// stretch, when no RPC is in flight, and restores grpc-go's own when it
// returns. Nothing else in the process may use gRPC while Echo runs.
//
// A unary operation is one call that sends a payload and receives it back;
// a streaming operation is one round trip on a bidirectional stream that
// each worker keeps open for the stretch. Payloads are
// google.protobuf.BytesValue messages, through grpc-go's proto codec on both
// sides, as a generated service would use them.
func Echo(ctx context.Context, o EchoOptions) (*report.Report, error) {
	modes := o.Modes
	if len(modes) == 0 {
		modes = []string{ModeUnary, ModeStreaming}
	}
	sizes := o.Sizes
	if len(sizes) == 0 {
		sizes = DefaultEchoSizes
	}
	var cases []report.Case
	for _, m := range modes {
		if m != ModeUnary && m != ModeStreaming {
			return nil, fmt.Errorf("unknown echo mode %q: want %s or %s", m, ModeUnary, ModeStreaming)
		}
		for _, s := range sizes {
			if s < 0 || s > MaxEchoSize {
				return nil, fmt.Errorf("echo payload of %d bytes: want 0 to %s", s, report.FormatBytes(MaxEchoSize))
			}
			cases = append(cases, report.Case{Mode: m, Size: s, Label: report.FormatBytes(s)})
		}
	}
	pool := o.Pool
	if pool == nil {
		var err error
		if pool, err = membuf.NewPool(membuf.Config{}); err != nil {
			return nil, err
		}
	}

	grpcDefault := mem.DefaultBufferPool()
	defer experimental.SetDefaultBufferPool(grpcDefault)

	var targets []*measure.Target
	for _, cfg := range []struct {
		name       string
		pool       mem.BufferPool
		serverOpts []grpc.ServerOption
		dialOpts   []grpc.DialOption
	}{
		{ConfigGRPCDefault, grpcDefault, nil, nil},
		{ConfigMembuf, pool, []grpc.ServerOption{experimental.BufferPool(pool)}, []grpc.DialOption{experimental.WithBufferPool(pool)}},
	} {
		e, err := startEcho(cfg.serverOpts, cfg.dialOpts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.name, err)
		}
		defer e.close()
		codecPool := cfg.pool
		targets = append(targets, &measure.Target{
			Name:      cfg.name,
			Prepare:   func() { experimental.SetDefaultBufferPool(codecPool) },
			Worker:    e.worker,
			ServerOps: e.served.Load,
			MeasureGC: true,
		})
	}

	r := &report.Report{
		Workload: "grpc",
		Started:  time.Now().UTC(),
		Machine:  report.ThisMachine(),
		Settings: map[string]string{
			"modes":       fmt.Sprint(modes),
			"sizes":       fmt.Sprint(sizes),
			"concurrency": fmt.Sprint(o.Bounds.Concurrency),
			"rounds":      fmt.Sprint(o.Bounds.Rounds),
			"duration":    o.Bounds.Duration.String(),
			"count":       fmt.Sprint(o.Bounds.Count),
		},
		Configs: []string{ConfigGRPCDefault, ConfigMembuf},
		GCScope: report.GCScopeProcess,
	}
	res, err := measure.Run(ctx, cases, targets, o.Bounds, o.Progress)
	if err != nil {
		return nil, err
	}
	r.Results = res
	return r, nil
}

// MaxEchoSize keeps a payload, with its framing, under grpc-go's default
// 4 MiB receive limit.
const MaxEchoSize = 4<<20 - 1<<10

const (
	echoServiceName = "membuf.bench.Echo"
	echoUnary       = "/" + echoServiceName + "/Unary"
	echoStream      = "/" + echoServiceName + "/Stream"
)

// echoService is the handler type of echoDesc; the service has no generated
// code (there is no protoc here), so it is described by hand.
type echoService interface{ count() }

var echoStreamDesc = grpc.StreamDesc{StreamName: "Stream", ServerStreams: true, ClientStreams: true, Handler: echoStreamHandler}

var echoDesc = grpc.ServiceDesc{
	ServiceName: echoServiceName,
	HandlerType: (*echoService)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Unary", Handler: echoUnaryHandler}},
	Streams:     []grpc.StreamDesc{echoStreamDesc},
}

// echo is one echo server and a client connected to it over loopback.
type echo struct {
	server *grpc.Server
	conn   *grpc.ClientConn
	// served counts the echoes the server has sent back.
	served atomic.Int64
}

func (e *echo) count() { e.served.Add(1) }

func echoUnaryHandler(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.BytesValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	srv.(echoService).count()
	return in, nil
}

func echoStreamHandler(srv any, stream grpc.ServerStream) error {
	in := new(wrapperspb.BytesValue)
	for {
		if err := stream.RecvMsg(in); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		// Count before sending: once the client has its answer, the count
		// must already include it.
		srv.(echoService).count()
		if err := stream.SendMsg(in); err != nil {
			return err
		}
	}
}

func startEcho(serverOpts []grpc.ServerOption, dialOpts []grpc.DialOption) (*echo, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &echo{server: grpc.NewServer(serverOpts...)}
	e.server.RegisterService(&echoDesc, e)
	go e.server.Serve(lis)
	opts := append(slices.Clip(dialOpts), grpc.WithTransportCredentials(insecure.NewCredentials()))
	e.conn, err = grpc.NewClient(lis.Addr().String(), opts...)
	if err != nil {
		e.server.Stop()
		return nil, err
	}
	return e, nil
}

func (e *echo) close() {
	e.conn.Close()
	e.server.Stop()
}

// worker returns the op of one worker. A unary worker reuses its request
// and response messages; a streaming worker opens its stream here.
func (e *echo) worker(ctx context.Context, c report.Case, w int) (measure.Op, func(), error) {
	req := &wrapperspb.BytesValue{Value: make([]byte, c.Size)}
	for i := range req.Value {
		req.Value[i] = byte(i + w)
	}
	resp := new(wrapperspb.BytesValue)
	check := func() error {
		if int64(len(resp.Value)) != c.Size {
			return fmt.Errorf("echo returned %d bytes, sent %d", len(resp.Value), c.Size)
		}
		return nil
	}
	switch c.Mode {
	case ModeUnary:
		return func(ctx context.Context, _ int64) (int64, error) {
			if err := e.conn.Invoke(ctx, echoUnary, req, resp); err != nil {
				return 0, err
			}
			return 2 * c.Size, check()
		}, func() {}, nil
	case ModeStreaming:
		sctx, cancel := context.WithCancel(ctx)
		stream, err := e.conn.NewStream(sctx, &echoStreamDesc, echoStream)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		release := func() {
			stream.CloseSend()
			// Drain to the end of the stream so that its server handler
			// returns before the next stretch starts.
			for stream.RecvMsg(resp) == nil {
			}
			cancel()
		}
		return func(ctx context.Context, _ int64) (int64, error) {
			if err := stream.SendMsg(req); err != nil {
				return 0, err
			}
			if err := stream.RecvMsg(resp); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return 0, err
			}
			return 2 * c.Size, check()
		}, release, nil
	}
	return nil, nil, fmt.Errorf("unknown echo mode %q", c.Mode)
}
