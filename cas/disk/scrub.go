package disk

import (
	"context"
	"errors"
	"fmt"
	"github.com/membuf/membuf/cas/disk/index"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/pace"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// The scrubber's pacing. A pass is held to the rate in "cost", not only in
// bytes hashed: with few bytes to pace, a scrubber that counts bytes alone
// lists its 256 shard directories hundreds of times a second and keeps a
// core busy at rest. So every blob costs at least scrubBlobCost (opening,
// stat-ing and reading a file costs system calls and a seek that its bytes
// do not show), every shard listing costs scrubListingCost, and a pass
// starts at most once per scrubPassInterval whatever it cost.
const (
	scrubBlobCost    = 64 << 10
	scrubListingCost = 64 << 10
	// scrubPassInterval bounds how soon rot is found in a small store (a
	// pass, then at most this long) against what an idle server spends:
	// a pass over an empty store is 256 directory listings, about 2 ms of
	// CPU, so at most 0.004% of a core.
	scrubPassInterval = time.Minute
)

// scrubber walks the store re-hashing every blob in turn (Scrub): the
// shard directories of cas/, then the pack segments' records, at a
// bounded rate. The verdicts are the checks'; the scrubber only decides
// what to look at next and how fast.
type scrubber struct {
	mu     *sync.Mutex
	fs     vfs.FS
	dir    string
	log    *slog.Logger
	idx    *index.Index
	files  *blobFiles
	packs  *packedBlobs
	checks *checks

	passes   int64 // full passes; guarded by mu
	listings int64 // shard directories listed; guarded by mu
}

// Scrub re-hashes every stored blob in turn, pass after pass, until ctx is
// done or the store is closed; it then returns nil. It reads at most
// bytesPerSecond on average, counting each blob as at least 64 KiB and each
// of the 256 shard directories it lists as 64 KiB, and starts a pass at
// most once a minute. A blob found corrupt is removed as on a read (see
// checks.go); one found intact counts as verified for reads.
// It touches no recency: scrubbing is not use. Run it on a goroutine of its
// own; bytesPerSecond must be positive.
func (s *Store) Scrub(ctx context.Context, bytesPerSecond int64) error {
	if bytesPerSecond <= 0 {
		return fmt.Errorf("disk: scrub rate %d must be positive", bytesPerSecond)
	}
	s.scrubber.run(ctx, pace.New(ctx, bytesPerSecond, s.scrubClock), s.scrubClock)
	return nil
}

// run scrubs pass after pass at p's rate until ctx is done or the store
// is closed.
func (sc *scrubber) run(ctx context.Context, p *pace.Pacer, clock pace.Clock) {
	for {
		passStart := clock.Now()
		for _, fn := range cas.Functions {
			if !sc.files.hasDir(entryKey{Kind: kindCAS, Fn: fn}) {
				continue // no blob of fn was ever a file here
			}
			for shard := range 256 {
				if ctx.Err() != nil || sc.closed() {
					return
				}
				sc.shard(ctx, fn, fmt.Sprintf("%02x", shard), p)
			}
		}
		sc.segments(ctx, p)
		if ctx.Err() != nil {
			return // the last shard was cut short: no whole pass
		}
		sc.mu.Lock()
		sc.passes++
		sc.mu.Unlock()
		if rest := scrubPassInterval - clock.Now().Sub(passStart); rest > 0 {
			if clock.Sleep(ctx, rest) != nil {
				return
			}
		}
	}
}

// shard re-hashes the blobs of one shard directory of the CAS blobs of
// function fn (listing one directory at a time keeps the scrubber's memory
// to a shard's names).
func (sc *scrubber) shard(ctx context.Context, fn cas.Function, shard string, p *pace.Pacer) {
	if p.Wait(scrubListingCost) != nil {
		return
	}
	ents, err := sc.fs.ReadDir(filepath.Join(sc.dir, entryKey{Kind: kindCAS, Fn: fn}.Dir(), shard))
	sc.mu.Lock()
	sc.listings++
	sc.mu.Unlock()
	if err != nil {
		sc.log.Warn("scrubber: listing a shard", "shard", shard, "err", err)
		return
	}
	for _, de := range ents {
		if ctx.Err() != nil {
			return
		}
		hash, _, _, ok := files.ParseName(fn, de.Name())
		if !ok {
			continue // a stray name
		}
		k := entryKey{Kind: kindCAS, Fn: fn, Hash: hash}
		e, ok := sc.get(k)
		if !ok || filepath.Base(sc.files.filePath(&e)) != de.Name() {
			continue // not an entry's file (evicted or replaced since the listing)
		}
		// Charge what the blob's bytes will not (see scrubBlobCost); the
		// bytes are charged as they are hashed.
		if p.Wait(max(0, scrubBlobCost-int(min(e.Size, scrubBlobCost)))) != nil {
			return
		}
		f, err := sc.files.open(&e)
		if err != nil {
			continue // evicted since
		}
		_, err = sc.checks.file(ctx, e, f, true, p.Wait)
		f.Close()
		if err != nil && !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, errReplaced) && ctx.Err() == nil {
			sc.log.Warn("scrubber: re-hashing a blob", "hash", k.Hash, "err", err)
		}
	}
}

// segments re-hashes the packed CAS blobs, segment by segment (each
// segment costs what a shard listing does).
func (sc *scrubber) segments(ctx context.Context, p *pace.Pacer) {
	sc.mu.Lock()
	segs := slices.Clone(sc.packs.set.SegmentsLocked())
	sc.mu.Unlock()
	for _, seg := range segs {
		if p.Wait(scrubListingCost) != nil {
			return
		}
		records, err := sc.packs.records(seg)
		if err != nil {
			if !errors.Is(err, errReplaced) {
				sc.log.Warn("scrubber: listing a pack segment", "segment", seg.Seq, "err", err)
			}
			continue
		}
		for _, r := range records {
			if ctx.Err() != nil {
				return
			}
			if entryKind(r.Kind) != kindCAS {
				continue
			}
			k := entryKey{Kind: kindCAS, Fn: cas.Function(r.Fn), Hash: r.HashHex()}
			e, ok := sc.get(k)
			if !ok || e.Seg != seg || e.Off != r.Off {
				continue // replaced, removed or evicted since
			}
			if p.Wait(max(0, scrubBlobCost-int(min(e.Size, scrubBlobCost)))) != nil {
				return
			}
			err := sc.checks.record(ctx, e, true, p.Wait)
			if err != nil && !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, errReplaced) && ctx.Err() == nil {
				sc.log.Warn("scrubber: re-hashing a packed blob", "hash", k.Hash, "err", err)
			}
		}
	}
}

// closed reports whether the store was closed.
func (sc *scrubber) closed() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.idx.Closed()
}

// get returns a copy of entry k without touching its recency.
func (sc *scrubber) get(k entryKey) (entry, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.idx.Get(k)
}
