package tracing

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// DialOption is an upstream connection's: a span per call, a child of the
// request's, whose context goes to the upstream (traceparent metadata). A
// call on behalf of a request the sampler left out starts no span and
// sends that request's decision (withCallerParent), so that an upstream
// follows it.
//
// A stats.Handler, not interceptors: one DialOption installs it for unary
// and streaming calls alike. It is on upstream calls only, which a server
// makes for what it lacks.
func (t *Tracing) DialOption() grpc.DialOption {
	return grpc.WithStatsHandler(clientHandler{t})
}

// clientHandler is DialOption's stats.Handler.
type clientHandler struct{ t *Tracing }

func (h clientHandler) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	ctx = h.t.withCallerParent(ctx)
	if parent := trace.SpanContextFromContext(ctx); !parent.IsValid() || parent.IsSampled() {
		// A recorded request's call, or background work's, which the
		// sampler decides for.
		name := rpcName(info.FullMethodName)
		ctx, _ = h.t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(semconv.RPCSystemNameGRPC, semconv.RPCMethod(name)))
	}
	var kv []string
	h.t.propagator.Inject(ctx, outgoingCarrier{&kv})
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func (clientHandler) HandleRPC(ctx context.Context, rs stats.RPCStats) {
	switch rs := rs.(type) {
	case *stats.OutHeader:
		if span := trace.SpanFromContext(ctx); span.IsRecording() && rs.RemoteAddr != nil {
			span.SetAttributes(serverAddress(rs.RemoteAddr.String())...)
		}
	case *stats.End:
		span := trace.SpanFromContext(ctx)
		if !span.IsRecording() {
			return
		}
		s, _ := status.FromError(rs.Error)
		span.SetAttributes(semconv.RPCResponseStatusCode(codeName(s.Code())))
		if rs.Error != nil { // every failed call is the caller's error
			span.SetStatus(otelcodes.Error, s.Message())
		}
		span.End()
	}
}

func (clientHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (clientHandler) HandleConn(context.Context, stats.ConnStats)                       {}

// serverAddress is server.address and server.port of addr (host:port).
func serverAddress(addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []attribute.KeyValue{semconv.ServerAddress(addr)}
	}
	if n, err := strconv.Atoi(port); err == nil {
		return []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(n)}
	}
	return []attribute.KeyValue{semconv.ServerAddress(host)}
}

// outgoingCarrier collects what a propagator injects as metadata's
// key-value pairs.
type outgoingCarrier struct{ kv *[]string }

func (c outgoingCarrier) Get(string) string { return "" }
func (c outgoingCarrier) Set(key, value string) {
	*c.kv = append(*c.kv, key, value)
}
func (c outgoingCarrier) Keys() []string { return nil }
