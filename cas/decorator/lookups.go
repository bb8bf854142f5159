package decorator

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/membuf/membuf/cas"
)

// LookupCounter is a cas.Storage that counts clients' lookups, found or
// not: Open, each digest of FindMissing, and GetActionResult. A call
// whose context is the server's own check (cas.ServerCheck: an action
// result's outputs, an upload found complete meanwhile) is not counted,
// so that the counts measure what clients asked. A blob a tier opens
// lazily (found on its first read) counts as found at Open; the tier's
// own statistics say where it was found.
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

func (c *LookupCounter) count(ctx context.Context, found, missed int) {
	if cas.IsServerCheck(ctx) {
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
func (c *LookupCounter) countErr(ctx context.Context, err error) {
	switch {
	case err == nil:
		c.count(ctx, 1, 0)
	case errors.Is(err, cas.ErrNotFound):
		c.count(ctx, 0, 1)
	}
}

// Open counts one lookup.
func (c *LookupCounter) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	r, err := c.Storage.Open(ctx, d)
	c.countErr(ctx, err)
	return r, err
}

// FindMissing counts a lookup per digest asked about.
func (c *LookupCounter) FindMissing(ctx context.Context, ds []cas.Digest) ([]cas.Digest, error) {
	missing, err := c.Storage.FindMissing(ctx, ds)
	if err == nil {
		c.count(ctx, len(ds)-len(missing), len(missing))
	}
	return missing, err
}

// GetActionResult counts one lookup.
func (c *LookupCounter) GetActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	data, err := c.Storage.GetActionResult(ctx, d)
	c.countErr(ctx, err)
	return data, err
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

func (r countedResults) GetActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	data, err := r.ActionCache.GetActionResult(ctx, d)
	r.c.countErr(ctx, err)
	return data, err
}
