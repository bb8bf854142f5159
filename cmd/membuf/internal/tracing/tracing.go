// Package tracing is membuf serve's OpenTelemetry traces (--otlp-endpoint):
// a span per request (gRPC and HTTP), W3C trace context taken from
// clients and passed on to upstreams, child spans around the served
// storage and each backend request, exported over OTLP/HTTP. A server
// without an endpoint builds nothing of it: no handler, no wrapper, no
// span, so the requests' paths are as they are untraced.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config is --otlp-endpoint's and --trace-sampling's.
type Config struct {
	// Endpoint is the OTLP/HTTP receiver's URL (http://collector:4318,
	// to which /v1/traces is added unless it has a path); "": no traces.
	Endpoint string
	// Sampling is the fraction of the traces that start here which are
	// recorded, 0 to 1; a request that comes with a trace context follows
	// its caller's decision.
	Sampling float64
	// Exporter, if not nil, receives the spans in place of an OTLP
	// endpoint's exporter (a program's own, or an in-memory one).
	Exporter sdktrace.SpanExporter
}

// Tracing is a configured tracer: what the server installs.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	// sampling is Config.Sampling: the fraction of the RPCs with no
	// trace context of their client's whose spans are recorded.
	sampling float64
	// servedNames are the served store's spans' names (Storage's "cas").
	servedNames [6]string
}

// New returns the tracer cfg configures, exporting in the background;
// nil for no endpoint and no exporter. It sends nothing until a span ends.
func New(cfg Config) (*Tracing, error) {
	if cfg.Endpoint == "" && cfg.Exporter == nil {
		return nil, nil
	}
	if cfg.Sampling < 0 || cfg.Sampling > 1 {
		return nil, fmt.Errorf("trace sampling %v: want 0 to 1", cfg.Sampling)
	}
	exporter := cfg.Exporter
	if exporter == nil {
		var err error
		if exporter, err = otlpExporter(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithSampler(sdktrace.ParentBased(rootSampler{sdktrace.TraceIDRatioBased(cfg.Sampling)})),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("membuf"))),
	)
	return &Tracing{
		provider:    provider,
		tracer:      provider.Tracer("github.com/membuf/membuf/cmd/membuf"),
		propagator:  propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		sampling:    cfg.Sampling,
		servedNames: spanNames("cas"),
	}, nil
}

// rootSampler decides for the spans that start a trace: those of the RPCs
// ServerOptions chose to record (chosenRoot in their context) are
// recorded; the others (background work: the upload queue's) by the
// ratio.
type rootSampler struct{ ratio sdktrace.Sampler }

func (s rootSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.ParentContext != nil && p.ParentContext.Value(chosenRoot{}) != nil {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return s.ratio.ShouldSample(p)
}

func (s rootSampler) Description() string { return "RPCs drawn, else " + s.ratio.Description() }

// otlpExporter is the OTLP/HTTP exporter to endpoint.
func otlpExporter(endpoint string) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want http://HOST:PORT or https://HOST:PORT", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("OTLP endpoint %q: %w", endpoint, err)
	}
	return exporter, nil
}

// start starts a span named name, a child of ctx's; or, when ctx's span
// is one the sampler left out, or ctx is a gRPC request ServerOptions
// left unrecorded (no span at all), none: ctx and a span that records
// nothing are returned, so that an unsampled request allocates no span
// and builds no attribute (the caller sets attributes only on a span that
// IsRecording). With no span in ctx outside a request (background work:
// an upload from the tier's queue), the sampler decides.
func (t *Tracing) start(ctx context.Context, name string) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	if parent.IsValid() && !parent.IsSampled() || !parent.IsValid() && inUnsampledRPC(ctx) {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, name)
}

// noSpan records nothing; an interface holding the empty struct
// allocates nothing.
var noSpan trace.Span = noop.Span{}

// Shutdown exports the spans still buffered and stops.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Handler wraps an HTTP listener's handler: a span per request, in the
// trace of the request's traceparent header.
func (t *Tracing) Handler(h http.Handler, name string) http.Handler {
	return otelhttp.NewHandler(h, name, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator))
}

// Transport wraps an upstream's HTTP transport: a span per request, whose
// context goes to the upstream.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	return &callerParentTransport{t, otelhttp.NewTransport(rt, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator))}
}

// callerParentTransport gives a request on behalf of an unrecorded gRPC
// request that request's decision (withCallerParent) before traced sees it.
type callerParentTransport struct {
	t      *Tracing
	traced http.RoundTripper
}

func (c *callerParentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if ctx := c.t.withCallerParent(r.Context()); ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	return c.traced.RoundTrip(r)
}
