package cas

import (
	"context"

	"github.com/membuf/membuf"
)

// ActionResultReader is an ActionCache that reads an entry into memory of
// the caller's pool, not a fresh slice: the path of a small entry read on
// every request (the HTTP cache's keyed entries, whose records hold their
// content). It is optional: ReadActionResult falls back to
// GetActionResult for an action cache without it. A decorator that changes
// what GetActionResult returns must implement it as well, or embed the
// action cache it wraps as an interface (cas.Storage, cas.ActionCache),
// which leaves it out.
type ActionResultReader interface {
	// ReadActionResult is GetActionResult's entry in a buffer with one
	// reference, its memory from pool (fresh if pool is nil), which the
	// caller must free whether or not err is nil (on an error its bytes
	// mean nothing).
	ReadActionResult(ctx context.Context, d Digest, lookup Lookup, pool membuf.BufferPool) (membuf.Buffer, error)
}

// ReadActionResult returns ac's entry for d (GetActionResult) in a
// buffer the caller must free, error or not: read into memory from pool if ac is an
// ActionResultReader, else GetActionResult's slice, wrapped.
func ReadActionResult(ctx context.Context, ac ActionCache, d Digest, lookup Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	if r, ok := ac.(ActionResultReader); ok {
		return r.ReadActionResult(ctx, d, lookup, pool)
	}
	data, err := ac.GetActionResult(ctx, d, lookup)
	if err != nil {
		return membuf.Buffer{}, err
	}
	return membuf.Wrap(data), nil
}
