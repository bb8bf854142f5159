package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/membuf/membuf/cas/disk/ages"
)

// DefaultMinAge is --min-age's default: Bazel's lease, how long it
// assumes a blob it was told of stays in the cache
// (--experimental_remote_cache_ttl).
const DefaultMinAge = 3 * time.Hour

// leaseWarningEvery is how often at most the warning is logged, and
// leaseCheckEvery how often the store's eviction ages are looked at.
const (
	leaseWarningEvery = time.Hour
	leaseCheckEvery   = time.Minute
)

// leaseWarning decides when to warn that the store evicts entries younger
// than minAge: a cache that does breaks builds without the bytes, whose
// clients fetch outputs long after they were told of them. One line at
// most every leaseWarningEvery, naming --max-size as the fix.
type leaseWarning struct {
	minAge  time.Duration
	maxSize int64
	warned  time.Time // zero: never
}

// check returns the attributes of the warning to log at now, given the
// store's eviction ages, or nil if none is due.
func (w *leaseWarning) check(now time.Time, e ages.Evictions) []any {
	if !e.YoungestSet || e.Youngest >= w.minAge || (!w.warned.IsZero() && now.Sub(w.warned) < leaseWarningEvery) {
		return nil
	}
	w.warned = now
	return []any{
		"youngest_evicted", e.Youngest.Round(time.Second), "min_age", w.minAge, "max_size", w.maxSize,
		"fix", "raise --max-size: clients (Bazel's builds without the bytes) assume an entry lives --min-age after they last used it",
	}
}

// warnOfYoungEvictions looks at the store's eviction ages every
// leaseCheckEvery until ctx ends, logging leaseWarning's line when due.
func warnOfYoungEvictions(ctx context.Context, tick <-chan time.Time, evictions func() ages.Evictions, w *leaseWarning, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick:
			if attrs := w.check(now, evictions()); attrs != nil {
				log.Warn("the store evicts entries younger than --min-age", attrs...)
			}
		}
	}
}
