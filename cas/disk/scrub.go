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
	"github.com/membuf/membuf/cas/disk/packfile"
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
	clock := s.scrubClock
	p := pace.New(ctx, bytesPerSecond, clock)
	for {
		passStart := clock.Now()
		for shard := range 256 {
			if ctx.Err() != nil || s.isClosed() {
				return nil
			}
			s.scrubShard(ctx, fmt.Sprintf("%02x", shard), p)
		}
		s.scrubPacks(ctx, p)
		if ctx.Err() != nil {
			return nil // the last shard was cut short: no whole pass
		}
		s.mu.Lock()
		s.scrubPasses++
		s.mu.Unlock()
		if rest := scrubPassInterval - clock.Now().Sub(passStart); rest > 0 {
			if clock.Sleep(ctx, rest) != nil {
				return nil
			}
		}
	}
}

// scrubShard re-hashes the blobs of one shard directory of cas/ (listing
// one directory at a time keeps the scrubber's memory to a shard's names).
func (s *Store) scrubShard(ctx context.Context, shard string, p *pace.Pacer) {
	if p.Wait(scrubListingCost) != nil {
		return
	}
	ents, err := s.fs.ReadDir(filepath.Join(s.dir, kindCAS.dir(), shard))
	s.mu.Lock()
	s.scrubListings++
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("scrubber: listing a shard", "shard", shard, "err", err)
		return
	}
	for _, de := range ents {
		if ctx.Err() != nil {
			return
		}
		hash, _, _, ok := files.ParseName(de.Name())
		if !ok {
			continue // a stray name
		}
		k := entryKey{kindCAS, hash}
		e, ok := s.entryOf(k)
		if !ok || filepath.Base(s.filePath(&e)) != de.Name() {
			continue // not an entry's file (evicted or replaced since the listing)
		}
		// Charge what the blob's bytes will not (see scrubBlobCost); the
		// bytes are charged as they are hashed.
		if p.Wait(max(0, scrubBlobCost-int(min(e.size, scrubBlobCost)))) != nil {
			return
		}
		f, err := s.fs.Open(s.filePath(&e))
		if err != nil {
			continue // evicted since
		}
		_, err = s.checkBlob(ctx, e, f, true, p.Wait)
		f.Close()
		if err != nil && !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, errReplaced) && ctx.Err() == nil {
			s.log.Warn("scrubber: re-hashing a blob", "hash", k.hash, "err", err)
		}
	}
}

// scrubPacks re-hashes the packed CAS blobs, segment by segment (each
// segment costs what a shard listing does).
func (s *Store) scrubPacks(ctx context.Context, p *pace.Pacer) {
	s.mu.Lock()
	segs := slices.Clone(s.segments.SegmentsLocked())
	s.mu.Unlock()
	for _, seg := range segs {
		if p.Wait(scrubListingCost) != nil {
			return
		}
		records, err := s.segmentRecords(seg)
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
			k := entryKey{kindCAS, r.HashHex()}
			e, ok := s.entryOf(k)
			if !ok || e.seg != seg || e.off != r.Off {
				continue // replaced, removed or evicted since
			}
			if p.Wait(max(0, scrubBlobCost-int(min(e.size, scrubBlobCost)))) != nil {
				return
			}
			err := s.checkPacked(ctx, e, true, p.Wait)
			if err != nil && !errors.Is(err, cas.ErrNotFound) && !errors.Is(err, errReplaced) && ctx.Err() == nil {
				s.log.Warn("scrubber: re-hashing a packed blob", "hash", k.hash, "err", err)
			}
		}
	}
}

// segmentRecords lists the committed records of seg from its headers;
// errReplaced if it was evicted. The index keeps no list of a segment's
// keys: this read costs what listing a shard directory does, once a pass.
func (s *Store) segmentRecords(seg *packs.Segment) ([]packfile.Record, error) {
	records, ok, err := s.segments.Records(seg)
	if !ok {
		return nil, errReplaced
	}
	return records, err
}

// entryOf returns a copy of entry k, without touching its recency: the
// scrubber's look at it.
func (s *Store) entryOf(k entryKey) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entryLocked(k)
}
