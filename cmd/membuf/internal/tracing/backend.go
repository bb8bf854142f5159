package tracing

import (
	"context"
	"errors"

	"github.com/membuf/membuf/cas/tier"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Backend returns b with a span around each request the tier makes of
// it, a child of the request that made the tier ask (a fill on a miss),
// or of none (an upload from the queue): which backend call took the
// time.
func (t *Tracing) Backend(b tier.Backend) tier.Backend { return &tracedBackend{b, t.tracer} }

type tracedBackend struct {
	tier.Backend
	tracer trace.Tracer
}

func keyAttrs(k tier.Key) trace.SpanStartOption {
	return trace.WithAttributes(attribute.String("membuf.hash", k.Hash), attribute.Int64("membuf.size", k.Size), attribute.Bool("membuf.ac", k.AC))
}

func (b *tracedBackend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	ctx, span := b.tracer.Start(ctx, "backend.Get", keyAttrs(k), trace.WithAttributes(attribute.Int64("membuf.offset", off)))
	o, err := b.Backend.Get(ctx, k, off)
	end(span, err)
	return o, err
}

func (b *tracedBackend) Put(ctx context.Context, uploads []tier.Upload) []error {
	ctx, span := b.tracer.Start(ctx, "backend.Put", trace.WithAttributes(attribute.Int("membuf.uploads", len(uploads))))
	errs := b.Backend.Put(ctx, uploads)
	end(span, errors.Join(errs...))
	return errs
}

func (b *tracedBackend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	ctx, span := b.tracer.Start(ctx, "backend.Stat", trace.WithAttributes(attribute.Int("membuf.keys", len(ks))))
	err := b.Backend.Stat(ctx, ks, sizes)
	end(span, err)
	return err
}

func (b *tracedBackend) Probe(ctx context.Context) error {
	ctx, span := b.tracer.Start(ctx, "backend.Probe")
	err := b.Backend.Probe(ctx)
	end(span, err)
	return err
}
