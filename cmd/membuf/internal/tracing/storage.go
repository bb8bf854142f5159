package tracing

import (
	"context"
	"errors"
	"net"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Storage returns s with a span around each call, a child of the
// request's, named part.Method ("cas.Open" for the store served, whose
// time includes the decorators' and tiers' in it; "disk.Open" for the
// disk under the tier): what that part took. A miss (cas.ErrNotFound) is
// an attribute, not an error.
func (t *Tracing) Storage(s cas.Storage, part string) cas.Storage {
	return &tracedStorage{Storage: s, t: t, names: spanNames(part)}
}

func spanNames(part string) (names [len(storageMethods)]string) {
	for i, m := range storageMethods {
		names[i] = part + "." + m
	}
	return names
}

// storageMethods are the methods' names in the order of the names array.
var storageMethods = [...]string{"Open", "FindMissing", "NewWriter", "PutBatch", "GetActionResult", "PutActionResult"}

const (
	openSpan = iota
	findMissingSpan
	newWriterSpan
	putBatchSpan
	getActionResultSpan
	putActionResultSpan
)

type tracedStorage struct {
	cas.Storage
	t     *Tracing
	names [len(storageMethods)]string // the spans' names, made once
}

// end ends span with err's outcome.
func end(span trace.Span, err error) {
	if span.IsRecording() {
		switch {
		case errors.Is(err, cas.ErrNotFound):
			span.SetAttributes(attribute.Bool("membuf.miss", true))
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// endEach is end for a batch's errors, joined only for a recorded span.
func endEach(span trace.Span, errs []error) {
	if span.IsRecording() {
		end(span, errors.Join(errs...))
		return
	}
	span.End()
}

func digestAttrs(span trace.Span, d cas.Digest) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("membuf.hash", d.Hash), attribute.Int64("membuf.size", d.Size))
	}
}

func (s *tracedStorage) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	ctx, span := s.t.start(ctx, s.names[openSpan])
	digestAttrs(span, d)
	r, err := s.Storage.Open(ctx, d)
	end(span, err)
	return r, err
}

func (s *tracedStorage) FindMissing(ctx context.Context, ds []cas.Digest, lookup cas.Lookup) ([]cas.Digest, error) {
	ctx, span := s.t.start(ctx, s.names[findMissingSpan])
	missing, err := s.Storage.FindMissing(ctx, ds, lookup)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("membuf.digests", len(ds)), attribute.Int("membuf.missing", len(missing)), attribute.String("membuf.lookup", lookup.String()))
	}
	end(span, err)
	return missing, err
}

func (s *tracedStorage) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	ctx, span := s.t.start(ctx, s.names[newWriterSpan])
	digestAttrs(span, d)
	w, err := s.Storage.NewWriter(ctx, d, arrived)
	end(span, err)
	return w, err
}

func (s *tracedStorage) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	ctx, span := s.t.start(ctx, s.names[putBatchSpan])
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("membuf.digests", len(ds)))
	}
	errs := s.Storage.PutBatch(ctx, ds, data, arrived)
	endEach(span, errs)
	return errs
}

func (s *tracedStorage) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	ctx, span := s.t.start(ctx, s.names[getActionResultSpan])
	digestAttrs(span, d)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("membuf.lookup", lookup.String()))
	}
	data, err := s.Storage.GetActionResult(ctx, d, lookup)
	end(span, err)
	return data, err
}

// ReadActionResult is GetActionResult into memory of pool
// (cas.ActionResultReader), under the same span, so that a keyed entry's
// read stays pooled with tracing on.
func (s *tracedStorage) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	ctx, span := s.t.start(ctx, s.names[getActionResultSpan])
	digestAttrs(span, d)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("membuf.lookup", lookup.String()))
	}
	b, err := cas.ReadActionResult(ctx, s.Storage, d, lookup, pool)
	end(span, err)
	return b, err
}

func (s *tracedStorage) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	ctx, span := s.t.start(ctx, s.names[putActionResultSpan])
	digestAttrs(span, d)
	err := s.Storage.PutActionResult(ctx, d, data)
	end(span, err)
	return err
}

// ActionCache returns ac (an instance's action cache over the served
// store) with the served store's spans around its calls.
func (t *Tracing) ActionCache(ac cas.ActionCache) cas.ActionCache {
	return &tracedStorage{Storage: actionCacheOnly{ActionCache: ac}, t: t, names: t.servedNames}
}

// actionCacheOnly is an action cache as a cas.Storage, for tracedStorage,
// which calls only its action cache's methods.
type actionCacheOnly struct {
	cas.ActionCache
	cas.BlobStore // nil: never called
}

// ReadActionResult passes the pooled read down: the embedded interface
// would hide it.
func (a actionCacheOnly) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	return cas.ReadActionResult(ctx, a.ActionCache, d, lookup, pool)
}
