package packed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/membuf/membuf/cas/internal/fanout"
)

// Eviction in the bucket, with a Retention. A pack's age counts from the
// time its index's name carries; past Retention and IndexTimeout (an
// entry is acknowledged within IndexTimeout of its index's name) its
// records are absent on every node, by the clock alone, and any node's
// janitor deletes its index, then the pack. A record read when its pack
// is older than half the Retention is copied forward into a new pack
// (forward.go), so what is read at least once per half Retention stays.
//
// No node coordinates with another: each lists what is old, and deleting
// what another node deleted already is harmless. The index goes first,
// so that a listed index names a deleted pack only for as long as one
// node's two deletes take; a node that meets a deleted pack reads a
// miss (Get), never an error or wrong bytes.

// maxPackWrite bounds the time from a pack's name to its index's (put.go
// fails a Put that takes longer, with a Retention): a pack no index names
// that is older than Retention, IndexTimeout and this is an orphan (its
// index's write failed), deleted too.
const maxPackWrite = 5 * time.Minute

// expired reports whether pack is past Retention at now: its records are
// absent, and the janitor deletes it.
func (b *Backend) expired(pack packInfo, now time.Time) bool {
	return b.cfg.Retention > 0 && now.UnixNano()-pack.indexed > int64(b.cfg.Retention+b.cfg.IndexTimeout)
}

// forwardDue reports whether a record read from pack at now is copied
// forward: its pack is older than half the Retention.
func (b *Backend) forwardDue(pack packInfo, now time.Time) bool {
	return b.cfg.Retention > 0 && now.UnixNano()-pack.indexed >= int64(b.cfg.Retention/2)
}

// Evict does the janitor's work once, with a Retention (without, it does
// nothing): it forgets the table's records of packs past it, then deletes
// each index past it (reading it first for its pack's name) and then its
// pack, then the packs older than Retention, IndexTimeout and
// maxPackWrite that are left: those no index names. It returns the first
// error; what it did not delete is deleted at a later call, by this node
// or another. Safe to run on many nodes at once.
func (b *Backend) Evict(ctx context.Context) error {
	if b.cfg.Retention <= 0 {
		return nil
	}
	b.evictMu.Lock()
	defer b.evictMu.Unlock()
	now := time.Now()
	b.forgetExpired(now)
	b.forgetUnusedPacks()
	cut := now.Add(-b.cfg.Retention - b.cfg.IndexTimeout)
	if err := b.evictOld(ctx, indexPrefix, cut, b.deleteIndex); err != nil {
		return err
	}
	// Every index named before cut was listed above (its write ended
	// within IndexTimeout of its name) and, with no error, deleted with
	// its pack; a pack named maxPackWrite before cut has no index left.
	return b.evictOld(ctx, dataPrefix, cut.Add(-maxPackWrite), b.deleteOrphan)
}

// forgetExpired drops the table's records of packs past Retention at now.
func (b *Backend) forgetExpired(now time.Time) {
	b.packsMu.RLock()
	expired := make([]bool, len(b.packs))
	for n, p := range b.packs {
		expired[n] = b.expired(p, now)
	}
	b.packsMu.RUnlock()
	n := b.table.Forget(func(loc location) bool {
		return !loc.Object && int(loc.Pack) < len(expired) && expired[loc.Pack]
	})
	b.c.recordsForgotten.Add(n)
}

// evictOld lists the names under prefix (packs/index/ or packs/data/)
// that a node wrote before cut, oldest first, and calls del on each,
// Concurrency at a time.
func (b *Backend) evictOld(ctx context.Context, prefix string, cut time.Time, del func(context.Context, string) error) error {
	end := fmt.Sprintf("%s%020d", prefix, max(cut.UnixNano(), 0))
	after := ""
	for {
		names, err := b.bucket.ListAfter(ctx, prefix, after, listPage)
		if err != nil {
			return err
		}
		var old []string
		for _, name := range names {
			if name >= end {
				break
			}
			if _, ok := nameTime(prefix, name); ok {
				old = append(old, name)
			}
		}
		if err := b.each(ctx, old, del); err != nil {
			return err
		}
		if len(names) < listPage || names[len(names)-1] >= end {
			return nil
		}
		after = names[len(names)-1]
	}
}

// nameTime is the time an index's or a pack's name carries, if a node
// wrote it.
func nameTime(prefix, name string) (time.Time, bool) {
	if prefix == indexPrefix {
		return indexTime(name)
	}
	id, ok := parsePackID(name)
	return time.Unix(0, id.nanos), ok
}

// each calls del on every name, Concurrency at a time, and returns the
// first error.
func (b *Backend) each(ctx context.Context, names []string, del func(context.Context, string) error) error {
	errs := make([]error, len(names))
	fanout.Each(len(names), b.cfg.Concurrency, func(i int) { errs[i] = del(ctx, names[i]) })
	for _, err := range errs {
		if err != nil {
			return err // one: an outage fails them all alike
		}
	}
	return nil
}

// deleteIndex deletes index object name, then the pack it names. An index
// already gone was another janitor's; an unreadable one is deleted all
// the same, its pack left to be deleted as an orphan.
func (b *Backend) deleteIndex(ctx context.Context, name string) error {
	ix, err := b.readIndex(ctx, name)
	switch {
	case errors.Is(err, errIndexGone):
		return nil
	case errors.Is(err, errBadIndex):
		ix = nil
	case err != nil:
		return err
	}
	if err := b.bucket.DeleteObject(ctx, name); err != nil {
		return err
	}
	b.c.indexesDeleted.Add(1)
	if ix == nil || ix.pack == "" {
		return nil
	}
	if _, ok := parsePackID(ix.pack); !ok {
		return nil // not a name a node writes (apply refuses the index): not the janitor's to delete
	}
	if err := b.bucket.DeleteObject(ctx, ix.pack); err != nil {
		return err // an orphan: deleted at a later call
	}
	b.c.packsDeleted.Add(1)
	return nil
}

// deleteOrphan deletes pack object name, which no index names.
func (b *Backend) deleteOrphan(ctx context.Context, name string) error {
	if err := b.bucket.DeleteObject(ctx, name); err != nil {
		return err
	}
	b.c.packsDeleted.Add(1)
	b.c.orphansDeleted.Add(1)
	return nil
}
