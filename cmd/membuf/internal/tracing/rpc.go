package tracing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// ServerOptions are the gRPC server's: a span per RPC the sampler records,
// in the trace of the context the client sent (traceparent metadata).
// Give them before the server's other interceptors, so that the span
// covers theirs.
//
// They are interceptors, not a stats.Handler: grpc-go builds stats for
// every message of every RPC once a server has a handler, sampled or not.
// An RPC the sampler leaves out costs one metadata lookup and one random
// draw, and allocates nothing: its context carries no span, which the
// storage and backend spans read as "not sampled" (start). One whose client
// sent a traceparent pays for parsing it instead of the draw: its sampled
// flag decides.
func (t *Tracing) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			ctx, span := t.startRPC(ctx, info.FullMethod)
			if span == nil {
				return handler(ctx, req)
			}
			resp, err := handler(ctx, req)
			endRPC(span, err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			ctx, span := t.startRPC(ss.Context(), info.FullMethod)
			if span == nil {
				return handler(srv, ss)
			}
			err := handler(srv, &spanStream{ServerStream: ss, ctx: ctx})
			endRPC(span, err)
			return err
		}),
	}
}

// spanStream is a server stream whose context holds the RPC's span.
type spanStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *spanStream) Context() context.Context { return s.ctx }

// startRPC starts the server span of the RPC method (/service/method) in
// ctx, or returns a nil span when it is not to be recorded: the client's
// traceparent says not sampled, or, with none, the draw against the
// sampling fraction.
func (t *Tracing) startRPC(ctx context.Context, method string) (context.Context, trace.Span) {
	if values := metadata.ValueFromIncomingContext(ctx, "traceparent"); values != nil {
		md, _ := metadata.FromIncomingContext(ctx)
		remote := t.propagator.Extract(ctx, mdCarrier(md)) // its span context, and baggage
		if parent := trace.SpanContextFromContext(remote); parent.IsValid() {
			if !parent.IsSampled() {
				return ctx, nil
			}
			return t.tracer.Start(remote, rpcName(method), rpcStartOptions(ctx, method)...)
		}
		// Not a valid traceparent: a trace that starts here.
	}
	if rand.Float64() >= t.sampling {
		return ctx, nil
	}
	return t.tracer.Start(context.WithValue(ctx, chosenRoot{}, true), rpcName(method), rpcStartOptions(ctx, method)...)
}

// rpcName is an RPC span's name: the method without its leading slash
// (google.bytestream.ByteStream/Read), as OpenTelemetry's conventions for
// gRPC name it.
func rpcName(method string) string {
	if len(method) > 0 && method[0] == '/' {
		return method[1:]
	}
	return method
}

// rpcStartOptions are a server span's kind and its semantic attributes:
// rpc.system.name, rpc.method, and the server's address and port, those
// of the connection's local end.
func rpcStartOptions(ctx context.Context, method string) []trace.SpanStartOption {
	attrs := []attribute.KeyValue{semconv.RPCSystemNameGRPC, semconv.RPCMethod(rpcName(method))}
	if p, ok := peer.FromContext(ctx); ok && p.LocalAddr != nil {
		attrs = append(attrs, serverAddress(p.LocalAddr.String())...)
	}
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
}

// endRPC ends an RPC's span with its outcome: the status code as
// rpc.response.status_code, and an error status for the codes that say
// the server failed (a client's mistake, INVALID_ARGUMENT or NOT_FOUND, is
// not the server's error).
func endRPC(span trace.Span, err error) {
	s, _ := status.FromError(err)
	span.SetAttributes(semconv.RPCResponseStatusCode(codeName(s.Code())))
	switch s.Code() {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		span.SetStatus(otelcodes.Error, s.Message())
	}
	span.End()
}

// codeName is c's name as gRPC's specification spells it (CANCELLED, not
// grpc-go's Canceled); UNKNOWN for a code it does not define.
func codeName(c codes.Code) string {
	return codeNames[min(c, codes.Unauthenticated+1)]
}

var codeNames = [...]string{
	codes.OK:                  "OK",
	codes.Canceled:            "CANCELLED",
	codes.Unknown:             "UNKNOWN",
	codes.InvalidArgument:     "INVALID_ARGUMENT",
	codes.DeadlineExceeded:    "DEADLINE_EXCEEDED",
	codes.NotFound:            "NOT_FOUND",
	codes.AlreadyExists:       "ALREADY_EXISTS",
	codes.PermissionDenied:    "PERMISSION_DENIED",
	codes.ResourceExhausted:   "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition:  "FAILED_PRECONDITION",
	codes.Aborted:             "ABORTED",
	codes.OutOfRange:          "OUT_OF_RANGE",
	codes.Unimplemented:       "UNIMPLEMENTED",
	codes.Internal:            "INTERNAL",
	codes.Unavailable:         "UNAVAILABLE",
	codes.DataLoss:            "DATA_LOSS",
	codes.Unauthenticated:     "UNAUTHENTICATED",
	codes.Unauthenticated + 1: "UNKNOWN",
}

// inUnsampledRPC reports whether ctx, which holds no span context, is a
// request to this gRPC server that ServerOptions left unrecorded (every
// request it records holds its span).
func inUnsampledRPC(ctx context.Context) bool {
	return grpc.ServerTransportStreamFromContext(ctx) != nil
}

// withCallerParent returns ctx, which holds no span context, with the one
// an upstream call is to carry when ctx is an unrecorded request to this
// server: its client's (traceparent, and baggage) if it sent one, else a
// new trace's, not sampled, so that an upstream follows the decision made
// here as it would a recorded request's. Other contexts (background work)
// are returned as they are: the sampler decides for them.
func (t *Tracing) withCallerParent(ctx context.Context) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() || !inUnsampledRPC(ctx) {
		return ctx
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("traceparent")) > 0 {
		if remote := t.propagator.Extract(ctx, mdCarrier(md)); trace.SpanContextFromContext(remote).IsValid() {
			return remote
		}
	}
	var traceID trace.TraceID
	var spanID trace.SpanID
	binary.BigEndian.PutUint64(traceID[:8], rand.Uint64())
	binary.BigEndian.PutUint64(traceID[8:], rand.Uint64()|1) // never all zeros, which is invalid
	binary.BigEndian.PutUint64(spanID[:], rand.Uint64()|1)
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID}))
}

// chosenRoot marks the context of an RPC whose span ServerOptions chose
// to record: the provider's root sampler records it (rootSampler).
type chosenRoot struct{}

// mdCarrier is gRPC metadata as the propagators' carrier.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
