package disk

import (
	"context"
	"fmt"
	"github.com/membuf/membuf/cas/disk/index"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/disk/checkpoint"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/pace"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/internal/lograte"
)

// ErrLocked: another process has the store's directory open (OpenStore).
var ErrLocked = vfs.ErrLocked

// Store is a content-addressed disk store with least-recently-used eviction.
//
// On disk, under its directory:
//
//	cas/ab/ab12...            one file per SHA-256 blob, named by its hash in hex, sharded by the first two hex characters
//	cas/ab/ab12...-{size}.zst a blob kept compressed: zstd frames and a seek table (package zstdseek)
//	packs/0000000000000001.pack small blobs and action results packed as records (WithPacks; package packfile)
//	ac/ab/ab12...             one file per action result (a serialized ActionResult), named by the action digest's hash
//	cas-blake3/, ac-sha1/     another digest function's files, in directories of their own made at its first file
//	tmp/                      uploads in progress; emptied at start
//
// A file appears under cas/ or ac/ only by a rename from tmp/ after its
// content was checked and fsynced, so every visible file is complete.
//
// The index (which entries exist, their sizes and recency) lives in memory and
// is rebuilt from the directory at start, ordered by modification time.
// A Store is safe for concurrent use.
type Store struct {
	dir     string
	maxSize int64
	log     *slog.Logger
	lock    vfs.DirLock

	// Options (StoreOption), read by OpenStore as it builds its parts.
	fs           vfs.FS // vfs.Default, or WithFS's
	noReadChecks bool   // WithoutReadChecks
	policy       CompressPolicy
	zp           *zstdseek.Pool
	buffers      membuf.BufferPool
	packMax      int64         // WithPacks: largest entry packed; 0: none is
	syncEvery    time.Duration // WithPackSync: 0, records are durable when acknowledged
	// syncByHand: the syncer's passes are a test's (packs.Config.SyncByHand).
	syncByHand bool
	scrubClock pace.Clock // pace.Wall, or a test's (scrub_test.go)

	// mu is the store's lock: it orders every operation, and guards the
	// index, the group commit's counts and the checkpoints. The pack
	// segments (packs.Set) have a lock of their own, taken inside this one.
	mu sync.Mutex

	// The parts a read or a write goes through, in that order: the index
	// (which entries exist, where, their recency, the accounting and
	// eviction), the location-blob sides (files of their own, records in
	// pack segments), verification (may this content be served?), and the
	// group commit that makes a write durable and visible.
	idx         *index.Index
	blobFiles   *blobFiles
	packedBlobs *packedBlobs
	committer   committer
	checkpoints *checkpoint.Checkpoints
	scrubber    scrubber
	// checkpointing: the index checkpoint being written in the background.
	checkpointing sync.WaitGroup

	// segments and packed are the index's segments (rebuild loads them)
	// and table (the crash tests look at it under mu).
	segments *packs.Set
	packed   *packindex.Table
	// checkpointLoaded: this start took the packed entries from the
	// index checkpoint.
	checkpointLoaded bool

	// Guarded by mu: blobs whose content no longer matched their name,
	// removed (dropCorrupt), and bytes re-hashed by first reads and the
	// scrubber (verify.go).
	corrupt       int64
	verifiedBytes int64
	// closed: Close has begun; guarded by mu.
	closed bool
}

// OpenStore opens the store in dir, creating dir (and the parents it
// lacks, each synced into its parent, so that a machine crash keeps them)
// if need be. maxSize is the number of bytes of blobs and action results
// kept on disk; 0 means no limit. It takes an exclusive lock on dir (held until Close; an error wrapping
// ErrLocked names the process holding it), removes files left in tmp/ by a
// previous run, rebuilds the index from disk and evicts down to maxSize.
// logger may be nil. Options: WithCompression, WithPacks, WithPackSync,
// WithoutReadChecks, WithFS.
func OpenStore(dir string, maxSize int64, logger *slog.Logger, opts ...StoreOption) (_ *Store, err error) {
	if maxSize < 0 {
		return nil, fmt.Errorf("disk: max size %d is negative", maxSize)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	} else {
		// A warning or error of one kind at most once a second: a full
		// disk fails every write alike, and rot found by a scrub or by
		// reads can find thousands of blobs bad at once.
		logger = slog.New(lograte.New(logger.Handler(), slog.LevelWarn))
	}
	s := &Store{
		dir:        dir,
		maxSize:    maxSize,
		log:        logger,
		fs:         vfs.Default,
		scrubClock: pace.Wall,
		packMax:    DefaultPackMax,
	}
	for _, o := range opts {
		o(s)
	}
	if s.zp == nil {
		if s.zp, err = zstdseek.NewPool(zstdseek.DefaultBudget(0)); err != nil {
			return nil, err
		}
	}
	s.buildParts()
	if err := files.MakeDir(s.fs, dir); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	// Before anything in dir is touched: another process's tmp/ is not ours
	// to empty.
	if s.lock, err = s.fs.LockDir(dir); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	defer func() {
		if err != nil {
			s.lock.Unlock()
		}
	}()
	if err := files.MakeDirs(s.fs, dir, []string{"tmp", packDirName}, []string{kindCAS.Dir(), kindAC.Dir()}); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := files.RemoveTemps(s.fs, s.blobFiles.tmpDir, s.log); err != nil {
		return nil, err
	}
	if err := s.rebuild(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.evictLocked()
	// Every entry, packed ones too (those are in no recency list), as
	// Stats, and so /status, counts them.
	totals := s.idx.Totals()
	fromCheckpoint, scanned, segments := s.checkpointLoaded, s.segments.Scanned(), len(s.segments.Segments())
	s.mu.Unlock()
	s.startCommits()
	if q := s.packedBlobs.start(); q != nil {
		go s.copyForwardLoop(q, s.packedBlobs.refreshed)
	}
	logger.Info("cas store opened", "dir", dir, "entries", totals.Entries, "bytes", totals.Bytes, "max_bytes", maxSize,
		"pack_segments", segments, "segments_scanned", scanned, "empty_segments_removed", s.segments.EmptyRemoved(), "index_checkpoint", fromCheckpoint)
	return s, nil
}

// buildParts makes the store's parts from its options, each built after
// those it calls, none pointing back: the pack segments first, then the
// index of the entries in them (which stamps a new segment with its clock
// of recency as it takes the segment's first slot), then the parts above.
func (s *Store) buildParts() {
	segSize, packMax := packConfig(s.maxSize, s.packMax)
	s.packMax = packMax
	cfg := packs.Config{
		FS: s.fs, Dir: filepath.Join(s.dir, packDirName), Log: s.log,
		SegmentSize: segSize, MaxRecord: packMax,
		StreamLanes: streamLanes,
		Zstd:        s.zp,
	}
	if packMax > 0 {
		cfg.SyncEvery = s.syncEvery
		cfg.SyncByHand = s.syncByHand
	}
	set := packs.NewSet(cfg)
	x := index.New(set, s.maxSize, s.log)
	tmpDir := filepath.Join(s.dir, "tmp")
	fb := &blobFiles{dir: s.dir, tmpDir: tmpDir, fs: s.fs, log: s.log, policy: s.policy, zp: s.zp, buffers: s.buffers}
	pb := &packedBlobs{log: s.log, set: set, max: packMax}
	ck := checkpoint.New(s.fs, filepath.Join(s.dir, checkpoint.Name), tmpDir, s.log, x, set, packMax)
	s.idx, s.blobFiles, s.packedBlobs, s.checkpoints = x, fb, pb, ck
	s.segments, s.packed = set, x.Table()
}

// WithFS makes the store keep its files in fsys instead of the operating
// system's file system (vfs.Default): a test's vfs.MemFS, which forgets
// at a crash what was not synced.
func WithFS(fsys vfs.FS) StoreOption {
	return func(s *Store) { s.fs = fsys }
}

// packDirName is the directory of the pack segments (package packs) under
// the store's.
const packDirName = "packs"

// Close marks the store closed; later calls fail with ErrClosed. Files in
// tmp/ are removed (uploads still running fail when they try to commit),
// then the directory's lock is released.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.blobFiles.close()
	s.committer.close() // commits still queued fail with cas.ErrClosed
	s.mu.Lock()
	s.packedBlobs.stopRefreshesLocked()
	s.mu.Unlock()
	s.packedBlobs.close()
	s.checkpointing.Wait()
	s.mu.Lock()
	stale := s.checkpoints.Stale()
	s.mu.Unlock()
	if s.packMax > 0 && stale {
		// Every segment is finished now: the next start scans none.
		if err := s.writeCheckpoint(); err != nil {
			s.log.Warn("writing the index checkpoint (the next start scans every pack segment)", "err", err)
		}
	}
	err := files.RemoveTemps(s.fs, s.blobFiles.tmpDir, s.log)
	if uerr := s.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}

// writeCheckpoint writes the index checkpoint now, holding the lock for
// one shard's copy of the table at a time.
func (s *Store) writeCheckpoint() error {
	s.mu.Lock()
	segs := s.checkpoints.Begin()
	s.mu.Unlock()
	err := s.checkpoints.Save(segs, func(i int, dst []packindex.Record) []packindex.Record {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.packed.ShardRecords(i, dst)
	})
	s.mu.Lock()
	s.checkpoints.Done(err)
	s.mu.Unlock()
	return err
}

// Stats returns a snapshot of the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.idx.Totals()
	return Stats{
		Blobs:             t.Entries - t.ACEntries,
		ActionResults:     t.ACEntries,
		Bytes:             t.Bytes,
		PartialBytes:      t.Partial,
		UncompressedBytes: t.PlainBytes,
		CompressedBlobs:   t.ZstdEntries,
		MaxBytes:          s.maxSize,
		Evictions:         t.Evictions,
		Corrupt:           s.corrupt,
		VerifiedBytes:     s.verifiedBytes,
		ScrubPasses:       s.scrubber.passes,
		ScrubListings:     s.scrubber.listings,
		Commits:           s.committer.counts.commits,
		CommitBatches:     s.committer.counts.batches,
	}
}

// EvictionGeneration counts the times entries have left the store's
// index (evicted, or removed as corrupt) since it opened: while it has
// not changed, every blob found present earlier still is. It takes no
// lock.
func (s *Store) EvictionGeneration() uint64 { return s.idx.Generation() }

// EvictionAges returns how old the entries evicted since the store opened
// were, by the time they were last used (a packed entry: its segment's
// last write), and the youngest evicted in the last hour.
func (s *Store) EvictionAges() ages.Evictions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.EvictionAges(time.Now())
}

// contains reports whether blob d is stored (the empty blob always is),
// waiting for a commit of it to be durable, and marks it used.
func (s *Store) contains(d cas.Digest) bool {
	if d.IsEmpty() {
		return true
	}
	e, ok := s.lookup(casKey(d), d.Size)
	if e.Pending != nil {
		// Nobody is told of an entry a crash could still take away.
		<-e.Pending.Durable
	}
	return ok
}

// lookup finds k in the index and marks it used (index.Index.Lookup:
// size -1 matches any), queueing a packed entry in an old segment to be
// copied forward. It does not wait for the entry's commit to be durable:
// a read need not (its content is durable, and a reader that outlives a
// crash is no more); a caller that tells a client the entry exists does.
func (s *Store) lookup(k entryKey, size int64) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.idx.Lookup(k, size)
	if ok && e.InOldSegment {
		s.packedBlobs.queueRefresh(e)
	}
	return e, ok
}

// FindMissing returns the digests in ds that are not stored, marking the
// others recently used.
func (s *Store) FindMissing(_ context.Context, ds []cas.Digest, _ cas.Lookup) ([]cas.Digest, error) {
	var missing []cas.Digest
	for _, d := range ds {
		if !s.contains(d) {
			missing = append(missing, d)
		}
	}
	return missing, nil
}
