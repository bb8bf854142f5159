package tracing

import (
	"context"
	"net/http"

	"github.com/membuf/membuf/cas/tier"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Backend returns b with a span around each request the tier makes of
// it, a child of the request that made the tier ask (a fill on a miss),
// or of none (an upload from the queue): which backend call took the
// time.
func (t *Tracing) Backend(b tier.Backend) tier.Backend {
	traced := &tracedBackend{b, t}
	// The tier finds a Toucher by asserting its Backend: keep b's.
	if toucher, ok := b.(tier.Toucher); ok {
		return &tracedToucher{traced, toucher}
	}
	return traced
}

type tracedBackend struct {
	tier.Backend
	t *Tracing
}

// tracedToucher is a tracedBackend of a tier.Toucher: told of local hits
// as the backend is, untraced (it returns at once).
type tracedToucher struct {
	*tracedBackend
	toucher tier.Toucher
}

func (b *tracedToucher) Touch(k tier.Key) { b.toucher.Touch(k) }

func keyAttrs(k tier.Key) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("membuf.hash", k.Hash), attribute.Int64("membuf.size", k.Size), attribute.Bool("membuf.ac", k.AC)}
}

func (b *tracedBackend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	ctx, span := b.t.start(ctx, "backend.Get")
	if span.IsRecording() {
		span.SetAttributes(append(keyAttrs(k), attribute.Int64("membuf.offset", off))...)
	}
	o, err := b.Backend.Get(ctx, k, off)
	end(span, err)
	return o, err
}

func (b *tracedBackend) Put(ctx context.Context, uploads []tier.Upload) []error {
	ctx, span := b.t.start(ctx, "backend.Put")
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("membuf.uploads", len(uploads)))
	}
	errs := b.Backend.Put(ctx, uploads)
	endEach(span, errs)
	return errs
}

func (b *tracedBackend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	ctx, span := b.t.start(ctx, "backend.Stat")
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("membuf.keys", len(ks)))
	}
	err := b.Backend.Stat(ctx, ks, sizes)
	end(span, err)
	return err
}

func (b *tracedBackend) Probe(ctx context.Context) error {
	ctx, span := b.t.start(ctx, "backend.Probe")
	err := b.Backend.Probe(ctx)
	end(span, err)
	return err
}

// ObjectStoreTransport returns what wraps an object store's SDK transport
// (the backends' Config.WrapTransport): a span named "NAME METHOD" per
// HTTP request the SDK sends (each retry one), a child of the backend
// request's. A request in no recorded span (the sampler left its request
// out, or background work of the SDK's own) goes straight through; no
// trace context is sent to the store, which keeps none.
func (t *Tracing) ObjectStoreTransport(name string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &sampledTransport{
			direct: rt,
			traced: otelhttp.NewTransport(rt,
				otelhttp.WithTracerProvider(t.provider),
				otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
				otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return name + " " + r.Method })),
		}
	}
}

// sampledTransport sends a request through traced only when its context's
// span is recorded.
type sampledTransport struct {
	direct, traced http.RoundTripper
}

func (s *sampledTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsSampled() {
		return s.direct.RoundTrip(r)
	}
	return s.traced.RoundTrip(r)
}
