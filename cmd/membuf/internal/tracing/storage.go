package tracing

import (
	"context"
	"errors"
	"net"

	"github.com/membuf/membuf/cas"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Storage returns s with a span around each call, a child of the
// request's: what the store (and the decorators and tiers in it) took.
// A miss (cas.ErrNotFound) is an attribute, not an error.
func (t *Tracing) Storage(s cas.Storage) cas.Storage { return &tracedStorage{s, t.tracer} }

type tracedStorage struct {
	cas.Storage
	tracer trace.Tracer
}

func (s *tracedStorage) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// end ends span with err's outcome.
func end(span trace.Span, err error) {
	switch {
	case errors.Is(err, cas.ErrNotFound):
		span.SetAttributes(attribute.Bool("membuf.miss", true))
	case err != nil:
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func digestAttrs(d cas.Digest) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("membuf.hash", d.Hash), attribute.Int64("membuf.size", d.Size)}
}

func (s *tracedStorage) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	ctx, span := s.start(ctx, "cas.Open", digestAttrs(d)...)
	r, err := s.Storage.Open(ctx, d)
	end(span, err)
	return r, err
}

func (s *tracedStorage) FindMissing(ctx context.Context, ds []cas.Digest) ([]cas.Digest, error) {
	ctx, span := s.start(ctx, "cas.FindMissing", attribute.Int("membuf.digests", len(ds)))
	missing, err := s.Storage.FindMissing(ctx, ds)
	span.SetAttributes(attribute.Int("membuf.missing", len(missing)))
	end(span, err)
	return missing, err
}

func (s *tracedStorage) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	ctx, span := s.start(ctx, "cas.NewWriter", digestAttrs(d)...)
	w, err := s.Storage.NewWriter(ctx, d, arrived)
	end(span, err)
	return w, err
}

func (s *tracedStorage) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	ctx, span := s.start(ctx, "cas.PutBatch", attribute.Int("membuf.digests", len(ds)))
	errs := s.Storage.PutBatch(ctx, ds, data, arrived)
	end(span, errors.Join(errs...))
	return errs
}

func (s *tracedStorage) GetActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	ctx, span := s.start(ctx, "cas.GetActionResult", digestAttrs(d)...)
	data, err := s.Storage.GetActionResult(ctx, d)
	end(span, err)
	return data, err
}

func (s *tracedStorage) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	ctx, span := s.start(ctx, "cas.PutActionResult", digestAttrs(d)...)
	err := s.Storage.PutActionResult(ctx, d, data)
	end(span, err)
	return err
}
