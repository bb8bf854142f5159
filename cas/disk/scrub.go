package disk

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/pace"
	"github.com/membuf/membuf/cas/disk/packs"
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

// scrubber is what the store counts of its scrubbing (Scrub), which
// walks the store re-hashing every blob in turn: the shard directories of
// cas/, then the pack segments' records, at a bounded rate. It only
// decides what to look at next and how fast; each blob is verified as a
// first read's is (verify.go), and the store acts on the verdict.
type scrubber struct {
	passes   int64 // full passes; guarded by the store's lock
	listings int64 // shard directories listed; guarded by the store's lock
}

// Scrub re-hashes every stored blob in turn, pass after pass, until ctx is
// done or the store is closed; it then returns nil. It reads at most
// bytesPerSecond on average, counting each blob as at least 64 KiB and each
// of the 256 shard directories it lists as 64 KiB, and starts a pass at
// most once a minute. A blob found corrupt is removed as on a read (see
// verify.go); one found intact counts as verified for reads.
// It touches no recency: scrubbing is not use. Run it on a goroutine of its
// own; bytesPerSecond must be positive.
func (s *Store) Scrub(ctx context.Context, bytesPerSecond int64) error {
	if bytesPerSecond <= 0 {
		return fmt.Errorf("disk: scrub rate %d must be positive", bytesPerSecond)
	}
	s.scrub(ctx, pace.New(ctx, bytesPerSecond, s.scrubClock), s.scrubClock)
	return nil
}

// scrub scrubs pass after pass at p's rate until ctx is done or the store
// is closed.
func (s *Store) scrub(ctx context.Context, p *pace.Pacer, clock pace.Clock) {
	for {
		passStart := clock.Now()
		for _, fn := range cas.Functions {
			if !s.blobFiles.hasDir(entryKey{Kind: kindCAS, Fn: fn}) {
				continue // no blob of fn was ever a file here
			}
			for shard := range 256 {
				if ctx.Err() != nil || s.isClosed() {
					return
				}
				s.scrubShard(ctx, fn, fmt.Sprintf("%02x", shard), p)
			}
		}
		s.scrubSegments(ctx, p)
		if ctx.Err() != nil {
			return // the last shard was cut short: no whole pass
		}
		s.mu.Lock()
		s.scrubber.passes++
		s.mu.Unlock()
		if rest := scrubPassInterval - clock.Now().Sub(passStart); rest > 0 {
			if clock.Sleep(ctx, rest) != nil {
				return
			}
		}
	}
}

// scrubShard re-hashes the blobs of one shard directory of the CAS blobs
// of function fn (listing one directory at a time keeps the scrubber's
// memory to a shard's names).
func (s *Store) scrubShard(ctx context.Context, fn cas.Function, shard string, p *pace.Pacer) {
	if p.Wait(scrubListingCost) != nil {
		return
	}
	ents, err := s.fs.ReadDir(filepath.Join(s.dir, entryKey{Kind: kindCAS, Fn: fn}.Dir(), shard))
	s.mu.Lock()
	s.scrubber.listings++
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("scrubber: listing a shard", "shard", shard, "err", err)
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
		e, ok := s.get(k)
		if !ok || filepath.Base(s.blobFiles.filePath(&e)) != de.Name() {
			continue // not an entry's file (evicted or replaced since the listing)
		}
		// Charge what the blob's bytes will not (see scrubBlobCost); the
		// bytes are charged as they are hashed.
		if p.Wait(max(0, scrubBlobCost-int(min(e.Size, scrubBlobCost)))) != nil {
			return
		}
		f, err := s.blobFiles.open(&e)
		if err != nil {
			continue // evicted since
		}
		_, err = s.verifyFile(ctx, e, f, true, p.Wait)
		f.Close()
		err = s.actOn(err)
		if err != nil && !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, errReplaced) && ctx.Err() == nil {
			s.log.Warn("scrubber: re-hashing a blob", "hash", k.Hash, "err", err)
		}
	}
}

// segments re-hashes the packed CAS blobs, segment by segment (each
// segment costs what a shard listing does).
func (s *Store) scrubSegments(ctx context.Context, p *pace.Pacer) {
	s.mu.Lock()
	segs := slices.Clone(s.segments.Segments())
	s.mu.Unlock()
	for _, seg := range segs {
		if p.Wait(scrubListingCost) != nil {
			return
		}
		records, err := s.packedBlobs.records(seg)
		if err != nil {
			if !errors.Is(err, errReplaced) {
				s.log.Warn("scrubber: listing a pack segment", "segment", seg.Seq, "err", err)
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
			e, rec := s.openRecordAt(k, seg, r.Off)
			if rec == nil {
				continue // replaced, removed or evicted since
			}
			if p.Wait(max(0, scrubBlobCost-int(min(e.Size, scrubBlobCost)))) != nil {
				rec.Close()
				return
			}
			err := s.actOn(s.verifyRecord(ctx, e, rec, true, p.Wait))
			rec.Close()
			if err != nil && !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, errReplaced) && ctx.Err() == nil {
				s.log.Warn("scrubber: re-hashing a packed blob", "hash", k.Hash, "err", err)
			}
		}
	}
}

// openRecordAt opens the record of k if it is still k's entry at off in
// seg, without touching its recency: a copy of its entry, and the record
// open unchecked (verification takes the verdict on it). nil if k has
// moved or gone since the listing.
func (s *Store) openRecordAt(k entryKey, seg *packs.Segment, off int64) (entry, *packs.Blob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.idx.Get(k)
	if !ok || e.Seg != seg || e.Off != off {
		return entry{}, nil
	}
	return e, s.segments.OpenRecord(e.Seg, e.Off, e.Size, e.CRC, false)
}

// closed reports whether the store was closed.
func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// get returns a copy of entry k without touching its recency.
func (s *Store) get(k entryKey) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.Get(k)
}
