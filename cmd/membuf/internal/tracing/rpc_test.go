package tracing_test

import (
	"context"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cmd/membuf/internal/tracing"
	"github.com/membuf/membuf/internal/testenv"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// testService answers EmptyCall, and StreamingOutputCall with one message
// per requested size; each opens a blob of its store first, as a
// ByteStream Read does, so that its span (or its absence) shows under the
// RPC's.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
	store cas.Storage
	// fail, if not nil, is EmptyCall's answer.
	fail error
	// upstream, if not nil, is called by EmptyCall, as a tier's fill does.
	upstream testgrpc.TestServiceClient

	mu          sync.Mutex
	traceparent []string // the last EmptyCall's
}

func (s *testService) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.mu.Lock()
	s.traceparent = metadata.ValueFromIncomingContext(ctx, "traceparent")
	s.mu.Unlock()
	s.store.Open(ctx, cas.DigestOf(nil))
	if s.upstream != nil {
		if _, err := s.upstream.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			return nil, err
		}
	}
	if s.fail != nil {
		return nil, s.fail
	}
	return &testgrpc.Empty{}, nil
}

func (s *testService) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	s.store.Open(stream.Context(), cas.DigestOf(nil))
	for _, p := range req.ResponseParameters {
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.Size)}}); err != nil {
			return err
		}
	}
	return nil
}

// serveTest serves svc, with opts, on a loopback port and returns a
// client of it.
func serveTest(t *testing.T, svc *testService, opts ...grpc.ServerOption) testgrpc.TestServiceClient {
	return serveTestDialling(t, svc, nil, opts...)
}

// serveTestDialling is serveTest whose client dials with dial (if not nil).
func serveTestDialling(t *testing.T, svc *testService, dial grpc.DialOption, opts ...grpc.ServerOption) testgrpc.TestServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Static flow-control windows, as membuf serve's: the allocations of
	// a call then do not depend on the connection's history.
	srv := grpc.NewServer(append(opts, grpc.StaticStreamWindowSize(1<<20), grpc.StaticConnWindowSize(1<<20))...)
	testgrpc.RegisterTestServiceServer(srv, svc)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStaticStreamWindowSize(1 << 20), grpc.WithStaticConnWindowSize(1 << 20)}
	if dial != nil {
		dialOpts = append(dialOpts, dial)
	}
	conn, err := grpc.NewClient(lis.Addr().String(), dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return testgrpc.NewTestServiceClient(conn)
}

// newTracing returns tracing at sampling into an in-memory exporter;
// its spans are the exporter's after tr.Shutdown.
func newTracing(t *testing.T, sampling float64) (*tracing.Tracing, keptSpans) {
	t.Helper()
	exported := keptSpans{tracetest.NewInMemoryExporter()}
	tr, err := tracing.New(tracing.Config{Exporter: exported, Sampling: sampling})
	if err != nil {
		t.Fatal(err)
	}
	return tr, exported
}

// readStream reads stream to its end.
func readStream(t *testing.T, stream grpc.ServerStreamingClient[testgrpc.StreamingOutputCallResponse]) {
	t.Helper()
	for {
		if _, err := stream.Recv(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// A recorded RPC, unary or streaming, is a server span named for its
// method with gRPC's semantic attributes (the server's address and port
// those the client dialled), and the storage's span under it.
func TestSampledRPCsHaveSpans(t *testing.T) {
	tr, exported := newTracing(t, 1)
	svc := &testService{store: tr.Storage(&fixedStore{}, "cas")}
	client := serveTest(t, svc, tr.ServerOptions()...)
	ctx := t.Context()
	if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	stream, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 10}, {Size: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	readStream(t, stream)
	svc.fail = status.Error(grpccodes.Unavailable, "disk gone")
	if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); status.Code(err) != grpccodes.Unavailable {
		t.Fatalf("failing call: %v", err)
	}
	tr.Shutdown(ctx)

	spans := exported.GetSpans()
	var rpcs []tracetest.SpanStub
	opens := map[trace.SpanID]int{} // cas.Open spans by parent
	for _, s := range spans {
		switch s.Name {
		case "cas.Open":
			opens[s.Parent.SpanID()]++
		default:
			rpcs = append(rpcs, s)
		}
	}
	if len(rpcs) != 3 {
		t.Fatalf("%d RPC spans: %v; want 3", len(rpcs), rpcs)
	}
	for i, want := range []struct {
		name, code string
		status     codes.Code
	}{
		{"grpc.testing.TestService/EmptyCall", "OK", codes.Unset},
		{"grpc.testing.TestService/StreamingOutputCall", "OK", codes.Unset},
		{"grpc.testing.TestService/EmptyCall", "UNAVAILABLE", codes.Error},
	} {
		s := rpcs[i]
		a := attrs(s)
		if s.Name != want.name || s.SpanKind != trace.SpanKindServer || s.Parent.IsValid() {
			t.Errorf("RPC span %d: %q, kind %v, parent %v; want %q, a server's, a root", i, s.Name, s.SpanKind, s.Parent.SpanID(), want.name)
		}
		if a["rpc.system.name"].AsString() != "grpc" || a["rpc.method"].AsString() != want.name || a["rpc.response.status_code"].AsString() != want.code {
			t.Errorf("RPC span %d attributes %v; want grpc, %s, %s", i, s.Attributes, want.name, want.code)
		}
		if a["server.address"].AsString() != "127.0.0.1" || a["server.port"].AsInt64() == 0 {
			t.Errorf("RPC span %d attributes %v; want server.address 127.0.0.1 and its port", i, s.Attributes)
		}
		if s.Status.Code != want.status {
			t.Errorf("RPC span %d status %v; want %v", i, s.Status, want.status)
		}
		if opens[s.SpanContext.SpanID()] != 1 {
			t.Errorf("RPC span %d has %d cas.Open spans under it; want 1", i, opens[s.SpanContext.SpanID()])
		}
	}
}

// The client's traceparent decides: a sampled one is the RPC span's
// parent whatever the server's sampling; an unsampled one records
// nothing, neither the RPC's span nor the storage's under it.
func TestClientTraceparentDecides(t *testing.T) {
	traceID, parentID := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct {
		sampling float64
		flags    string
		spans    int
	}{
		{0, "01", 2}, // the RPC's and cas.Open
		{1, "00", 0},
	} {
		tr, exported := newTracing(t, c.sampling)
		client := serveTest(t, &testService{store: tr.Storage(&fixedStore{}, "cas")}, tr.ServerOptions()...)
		ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+traceID+"-"+parentID+"-"+c.flags)
		if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			t.Fatal(err)
		}
		tr.Shutdown(t.Context())
		spans := exported.GetSpans()
		if len(spans) != c.spans {
			t.Fatalf("sampling %v, traceparent flags %s: %d spans %v; want %d", c.sampling, c.flags, len(spans), spans, c.spans)
		}
		for _, s := range spans {
			if s.SpanContext.TraceID().String() != traceID {
				t.Errorf("span %q in trace %v; want the client's %s", s.Name, s.SpanContext.TraceID(), traceID)
			}
			if s.Name == "grpc.testing.TestService/EmptyCall" && (s.Parent.SpanID().String() != parentID || !s.Parent.IsRemote()) {
				t.Errorf("RPC span's parent %v; want the client's remote span %s", s.Parent, parentID)
			}
		}
	}
}

// An RPC the sampler leaves out allocates no more than on a server without
// tracing, unary or streaming (a read's shape: one request, messages
// back), and records nothing.
func TestUnsampledRPCsAllocateNothing(t *testing.T) {
	testenv.SkipUnderRace(t, "the race detector's allocations vary from call to call; slow, too")
	tr, exported := newTracing(t, 0)
	// membuf serve always has interceptors (metrics, latency): the server
	// without tracing has one that passes the call on, so that what is
	// compared is what tracing's do, not the interceptor chain grpc-go
	// builds (a closure per interceptor per RPC, whatever it does).
	plain := serveTest(t, &testService{store: &fixedStore{}},
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, ss)
		}))
	traced := serveTest(t, &testService{store: tr.Storage(&fixedStore{}, "cas")}, tr.ServerOptions()...)
	ctx := t.Context()
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 64 << 10}}}
	for name, call := range map[string]func(testgrpc.TestServiceClient){
		"unary": func(c testgrpc.TestServiceClient) {
			if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
				t.Fatal(err)
			}
		},
		"streaming": func(c testgrpc.TestServiceClient) {
			stream, err := c.StreamingOutputCall(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			readStream(t, stream)
		},
	} {
		call(plain) // connections up
		call(traced)
		// gRPC's own allocations vary from call to call, never below
		// a floor (flow control's and the connection's goroutines add
		// some to a batch): each server's fewest of batches taking turns.
		bare, got := math.Inf(1), math.Inf(1)
		for range 5 {
			bare = min(bare, testing.AllocsPerRun(200, func() { call(plain) }))
			got = min(got, testing.AllocsPerRun(200, func() { call(traced) }))
		}
		if got-bare >= 1 {
			t.Errorf("unsampled %s RPC: %v allocations traced, %v without tracing", name, got, bare)
		}
	}
	tr.Shutdown(ctx)
	if spans := exported.GetSpans(); len(spans) != 0 {
		t.Errorf("unsampled RPCs recorded %d spans: %v", len(spans), spans)
	}
}

// A call to an upstream on behalf of an RPC left out, here by its
// client's traceparent, carries that decision and trace: an upstream that
// would record every trace it starts records nothing, and neither does the
// edge's client span, whose own sampler would record it.
func TestUnsampledRPCsUpstreamFollows(t *testing.T) {
	upTr, upExported := newTracing(t, 1)
	upSvc := &testService{store: upTr.Storage(&fixedStore{}, "cas")}
	edgeTr, edgeExported := newTracing(t, 1)
	upstream := serveTestDialling(t, upSvc, edgeTr.DialOption(), upTr.ServerOptions()...)
	edge := serveTest(t, &testService{store: edgeTr.Storage(&fixedStore{}, "cas"), upstream: upstream}, edgeTr.ServerOptions()...)
	traceID := "4bf92f3577b34da6a3ce929d0e0e4736"
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-00")
	if _, err := edge.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	edgeTr.Shutdown(t.Context())
	upTr.Shutdown(t.Context())
	if spans := append(edgeExported.GetSpans(), upExported.GetSpans()...); len(spans) != 0 {
		t.Errorf("an unsampled trace recorded %d spans: %v", len(spans), spans)
	}
	upSvc.mu.Lock()
	defer upSvc.mu.Unlock()
	if len(upSvc.traceparent) != 1 || !strings.HasPrefix(upSvc.traceparent[0], "00-"+traceID+"-") || !strings.HasSuffix(upSvc.traceparent[0], "-00") {
		t.Errorf("the upstream was sent traceparent %q; want the client's trace, not sampled", upSvc.traceparent)
	}
}

// A recorded request's upstream call is a client span under the request's,
// with gRPC's semantic attributes (the upstream's address and port), and
// the upstream, which records no trace it starts, records its own span
// under it: the context went with the call. A call that fails is an error.
func TestSampledUpstreamCallsHaveClientSpans(t *testing.T) {
	upTr, upExported := newTracing(t, 0)
	upSvc := &testService{store: &fixedStore{}}
	edgeTr, edgeExported := newTracing(t, 1)
	upstream := serveTestDialling(t, upSvc, edgeTr.DialOption(), upTr.ServerOptions()...)
	edge := serveTest(t, &testService{store: edgeTr.Storage(&fixedStore{}, "cas"), upstream: upstream}, edgeTr.ServerOptions()...)
	if _, err := edge.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil {
		t.Fatal(err)
	}
	upSvc.fail = status.Error(grpccodes.NotFound, "not here")
	if _, err := edge.EmptyCall(t.Context(), &testgrpc.Empty{}); status.Code(err) != grpccodes.NotFound {
		t.Fatalf("a call the upstream fails: %v", err)
	}
	edgeTr.Shutdown(t.Context())
	upTr.Shutdown(t.Context())

	const name = "grpc.testing.TestService/EmptyCall"
	servers := map[trace.SpanID]tracetest.SpanStub{}
	var clients []tracetest.SpanStub
	for _, s := range edgeExported.GetSpans() {
		switch {
		case s.Name == name && s.SpanKind == trace.SpanKindServer:
			servers[s.SpanContext.SpanID()] = s
		case s.Name == name && s.SpanKind == trace.SpanKindClient:
			clients = append(clients, s)
		}
	}
	upstreams := map[trace.SpanID]tracetest.SpanStub{} // by parent
	for _, s := range upExported.GetSpans() {
		upstreams[s.Parent.SpanID()] = s
	}
	if len(servers) != 2 || len(clients) != 2 || len(upstreams) != 2 {
		t.Fatalf("%d edge server spans, %d client spans, %d upstream spans; want 2 each", len(servers), len(clients), len(upstreams))
	}
	for i, want := range []struct {
		code   string
		status codes.Code
	}{{"OK", codes.Unset}, {"NOT_FOUND", codes.Error}} {
		c := clients[i]
		a := attrs(c)
		if _, ok := servers[c.Parent.SpanID()]; !ok {
			t.Errorf("client span %d's parent %v is not an edge server span", i, c.Parent.SpanID())
		}
		if a["rpc.system.name"].AsString() != "grpc" || a["rpc.method"].AsString() != name || a["rpc.response.status_code"].AsString() != want.code ||
			a["server.address"].AsString() != "127.0.0.1" || a["server.port"].AsInt64() == 0 {
			t.Errorf("client span %d attributes %v; want grpc, %s, %s, the upstream's address and port", i, c.Attributes, name, want.code)
		}
		if c.Status.Code != want.status {
			t.Errorf("client span %d status %v; want %v", i, c.Status, want.status)
		}
		up, ok := upstreams[c.SpanContext.SpanID()]
		if !ok || up.Name != name || up.SpanKind != trace.SpanKindServer || up.SpanContext.TraceID() != c.SpanContext.TraceID() {
			t.Errorf("no upstream server span under client span %d (upstream's spans by parent: %v)", i, upstreams)
		}
	}
}
