package server

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/decorator"
	"github.com/membuf/membuf/cas/disk"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/tier"
)

// This file composes the storage the server serves from its
// configuration: openStores is the one function that names a concrete
// store type. The rest of the server knows the stores by what it does
// with them (localStore, sharedTier) and serves cas.Storage.

// localStore is what the server does with the disk store beyond serving
// from it: its statistics, the scrubber, the lease warning, closing it.
type localStore interface {
	cas.Storage
	Stats() disk.Stats
	EvictionAges() ages.Evictions
	EvictionGeneration() uint64
	Scrub(ctx context.Context, rate int64) error
	Close() error
}

// sharedTier is what the server does with the shared tier (--upstream)
// beyond serving from it: its statistics, draining and closing it.
type sharedTier interface {
	cas.Storage
	TierStats() tier.Stats
	Drain(ctx context.Context) error
	Close() error
}

// openStores creates --dir if missing, opens the disk store in it and,
// with --upstream, the shared tier in front of its backend, and composes
// what the services serve: the tier or the disk store, inside the
// decorators (action results past --ac-max-age missed, blobs over
// --max-blob-size refused, clients' lookups counted). What it opens stays in s for the stop steps, even when a
// later part fails.
func (s *Server) openStores(ctx context.Context) error {
	dir, err := filepath.Abs(s.cfg.Store.Dir)
	if err != nil {
		return fmt.Errorf("--dir %q: %w", s.cfg.Store.Dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	s.dir = dir
	c := s.cfg.Store
	opts := []disk.StoreOption{disk.WithCompression(disk.Compression{
		Policy:  c.Compression,
		Zstd:    s.zstd,
		Buffers: s.pool,
	}), disk.WithPacks(c.PackMax), disk.WithPackSync(c.PackSync)}
	if !c.CheckReads {
		opts = append(opts, disk.WithoutReadChecks())
	}
	store, err := disk.OpenStore(dir, c.MaxSize, s.log, opts...)
	if err != nil {
		return fmt.Errorf("open store in %s: %w", dir, err)
	}
	s.store = store
	served := cas.Storage(store)
	if u := s.cfg.Upstream; u.URL != "" {
		backend, err := newBackend(ctx, u.Parsed, u.Timeout, 32, s.log, s.tracing)
		if err != nil {
			return fmt.Errorf("--upstream: %w", err)
		}
		tierBackend, local := backend.Backend, cas.Storage(store)
		if s.tracing != nil {
			tierBackend, local = s.tracing.Backend(backend.Backend), s.tracing.Storage(store, "disk")
		}
		t, err := tier.Open(ctx, local, backend.tierConfig(tier.Config{
			Backend:        tierBackend,
			Name:           u.Parsed.Scheme,
			Dir:            dir,
			LocalMaxSize:   c.MaxSize,
			Pool:           s.pool,
			ChunkSize:      int(s.cfg.Limits.ChunkSize),
			WriteThrough:   u.WriteThrough,
			UploadWorkers:  4,
			RequestTimeout: u.Timeout,
			MissingTTL:     cmp.Or(u.MissingTTL, -1), // 0 on the command line: remember no misses
			Logger:         s.log,
		}))
		if err != nil {
			backend.close()
			return fmt.Errorf("--upstream: %w", err)
		}
		backend.readAheadInto(t)
		s.tier, s.closeBackend = t, backend.close
		s.packs = backend.packStats()
		served = t
	}
	s.maxBlobSize = maxBlobSize(c.MaxSize, s.cfg.Limits.MaxBlobSize)
	// The expiry's stamps are taken off whatever --ac-max-age is now: a
	// result stored while it was set is served as uploaded once it is not.
	expiring := decorator.ExpireActionResults(served, s.cfg.AC.MaxAge)
	limited := decorator.LimitSize(expiring, s.maxBlobSize)
	s.lookups = decorator.CountLookups(limited)
	s.storage = s.lookups
	if s.tracing != nil {
		s.storage = s.tracing.Storage(s.lookups, "cas")
	}
	if s.cfg.Access != nil && s.cfg.Access.Instances != nil {
		expiring.Instances = s.cfg.Access.Instances.ACMaxAge
		s.actionCacheOf = func(instance string) cas.ActionCache {
			return s.instanceResults(expiring, limited, instance)
		}
	}
	return nil
}

// instanceResults is instance's action cache: with an age limit of its
// own (the access file's ac-max-age=), its expiry under the same
// decorators as the served store's; else the served store.
func (s *Server) instanceResults(expiring *decorator.ActionResultExpiry, limited cas.Storage, instance string) cas.ActionCache {
	ac := expiring.ForInstance(instance)
	if ac == cas.ActionCache(expiring) {
		return s.storage
	}
	if l, ok := limited.(*decorator.SizeLimit); ok {
		ac = l.ActionCache(ac)
	}
	ac = s.lookups.ActionCache(ac)
	if s.tracing != nil {
		ac = s.tracing.ActionCache(ac)
	}
	return ac
}

// maxBlobSize is the largest blob the server accepts: --max-blob-size, or
// the disk's size if that is smaller; 0: no limit.
func maxBlobSize(diskSize, flag int64) int64 {
	switch {
	case flag <= 0:
		return max(diskSize, 0)
	case diskSize <= 0:
		return flag
	}
	return min(diskSize, flag)
}
