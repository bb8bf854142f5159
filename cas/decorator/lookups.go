package decorator

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// LookupCounter is a cas.Storage that counts clients' lookups, found or
// not: Open, each digest of FindMissing, and GetActionResult. A lookup
// that is the server's own check (cas.ServerCheck: an action result's
// outputs, a keyed entry written once; cas.QuickCheck: an upload found
// complete meanwhile) is not counted, so that the counts measure what
// clients asked; it is passed down unchanged. Open is always a client's.
// A blob a tier opens lazily (found on its first read) counts as found
// at Open; the tier's own statistics say where it was found.
type LookupCounter struct {
	cas.Storage
	hits, misses atomic.Int64
}

// CountLookups returns s counting its clients' lookups.
func CountLookups(s cas.Storage) *LookupCounter {
	return &LookupCounter{Storage: s}
}

// Lookups returns the lookups counted so far that found their entry, and
// those that did not.
func (c *LookupCounter) Lookups() (hits, misses int64) {
	return c.hits.Load(), c.misses.Load()
}

func (c *LookupCounter) count(lookup cas.Lookup, found, missed int) {
	if !lookup.Counted() {
		return
	}
	if found > 0 {
		c.hits.Add(int64(found))
	}
	if missed > 0 {
		c.misses.Add(int64(missed))
	}
}

// countErr counts one lookup by its error: ErrNotFound is a miss, no error
// a hit, any other error nothing (the lookup did not get an answer).
func (c *LookupCounter) countErr(lookup cas.Lookup, err error) {
	switch {
	case err == nil:
		c.count(lookup, 1, 0)
	case errors.Is(err, cas.ErrNotFound):
		c.count(lookup, 0, 1)
	}
}

// Open counts one lookup.
func (c *LookupCounter) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	r, err := c.Storage.Open(ctx, d)
	c.countErr(cas.ClientLookup, err)
	return r, err
}

// FindMissing counts a lookup per digest asked about.
func (c *LookupCounter) FindMissing(ctx context.Context, ds []cas.Digest, lookup cas.Lookup) ([]cas.Digest, error) {
	missing, err := c.Storage.FindMissing(ctx, ds, lookup)
	if err == nil {
		c.count(lookup, len(ds)-len(missing), len(missing))
	}
	return missing, err
}

// GetActionResult counts one lookup.
func (c *LookupCounter) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	data, err := c.Storage.GetActionResult(ctx, d, lookup)
	c.countErr(lookup, err)
	return data, err
}

// ReadActionResult is GetActionResult into memory of pool
// (cas.ActionResultReader), counted alike.
func (c *LookupCounter) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	b, err := cas.ReadActionResult(ctx, c.Storage, d, lookup, pool)
	c.countErr(lookup, err)
	return b, err
}

// ActionCache returns ac, an action cache over this counter's store (an
// instance's, with its own age limit), with its lookups counted here.
func (c *LookupCounter) ActionCache(ac cas.ActionCache) cas.ActionCache {
	return countedResults{ac, c}
}

type countedResults struct {
	cas.ActionCache
	c *LookupCounter
}

func (r countedResults) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	data, err := r.ActionCache.GetActionResult(ctx, d, lookup)
	r.c.countErr(lookup, err)
	return data, err
}

func (r countedResults) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	b, err := cas.ReadActionResult(ctx, r.ActionCache, d, lookup, pool)
	r.c.countErr(lookup, err)
	return b, err
}
