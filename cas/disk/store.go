package disk

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/pace"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// ErrLocked: another process has the store's directory open (OpenStore).
var ErrLocked = vfs.ErrLocked

// Store is a content-addressed disk store with least-recently-used eviction.
//
// On disk, under its directory:
//
//	cas/ab/ab12...            one file per blob, named by its SHA-256 in hex, sharded by the first two hex characters
//	cas/ab/ab12...-{size}.zst a blob kept compressed: zstd frames and a seek table (seektable.go)
//	packs/0000000000000001.pack small blobs and action results packed as records (WithPacks; package packfile)
//	ac/ab/ab12...             one file per action result (a serialized ActionResult), named by the action digest's hash
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
	tmpDir  string
	maxSize int64
	log     *slog.Logger
	fs      vfs.FS // vfs.Default, or WithFS's
	lock    vfs.DirLock

	// noReadChecks: reads trust the disk after a blob's first check
	// (WithoutReadChecks; readcheck.go).
	noReadChecks bool

	// How blobs are compressed (WithCompression).
	policy  CompressPolicy
	zp      *zstdseek.Pool
	buffers membuf.BufferPool

	mu            sync.Mutex
	files         map[entryKey]*entry   // the entries kept as files
	packed        packindex.Table       // the packed entries (recordtable.go)
	sweep         packindex.SweepCursor // where the table's sweep goes on (packedindex.go)
	isLiveSeq     func(seq uint32) bool
	lru           *list.List // files only, front: most recently used
	entries       int64      // in the index: files and live records
	bytes         int64      // on disk
	plainBytes    int64      // the entries' own sizes
	zstdEntries   int64      // how many blobs are kept compressed
	partial       int64      // bytes reserved by uploads in progress (Writers); they count towards maxSize
	acEntries     int64      // how many index entries are action results
	evictions     int64
	corrupt       int64 // blobs whose content no longer matched their name, removed
	verified      int64 // bytes re-hashed by first reads and the scrubber
	scrubPasses   int64 // full passes of the scrubber
	scrubListings int64 // shard directories the scrubber listed
	commits       int64 // entries committed (group commit)
	batches       int64 // group commits run
	closed        bool

	committer *groupCommit

	// generation counts the times entries left the index (eviction,
	// removal): EvictionGeneration. Atomic, so that a reader need not
	// take mu.
	generation atomic.Uint64
	// How old evicted entries were (EvictionAges), guarded by mu: clock
	// maps tick to wall time, evicted records the ages.
	clock   ages.Clock
	evicted ages.Recorder

	// Packs (packs.go; package packs); guarded by mu.
	packMax   int64         // largest entry packed; 0: none is
	segSize   int64         // bytes of slots a segment takes before it is sealed
	segments  *packs.Set    // shares mu
	syncEvery time.Duration // WithPackSync: 0, records are durable when acknowledged
	// syncByHand: the syncer's passes are a test's (packs.Config.SyncByHand).
	syncByHand bool
	tick       uint64       // counts uses and segments: the store's clock of recency
	refreshes  chan refresh // packed entries to copy forward out of old segments; nil once closed

	// Index checkpoints (checkpoint.go); guarded by mu.
	sinceCheckpoint    int64          // packed records indexed since the last was started
	checkpointRunning  bool           // one is being written
	checkpoints        sync.WaitGroup // the one being written
	indexChanged       bool           // a record put or dropped, or a segment evicted, since the last checkpoint
	checkpointSegments int            // segments the last checkpoint covers
	checkpointLoaded   bool           // this start took the packed entries from one

	scrubClock pace.Clock // pace.Wall, or a test's (scrub_test.go)
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
	}
	s := &Store{
		dir:     dir,
		tmpDir:  filepath.Join(dir, "tmp"),
		maxSize: maxSize,
		log:     logger,
		fs:      vfs.Default,
		files:   make(map[entryKey]*entry),
		lru:     list.New(),

		scrubClock: pace.Wall,
		packMax:    DefaultPackMax,
	}
	s.isLiveSeq = s.isLiveSeqLocked
	for _, o := range opts {
		o(s)
	}
	if s.zp == nil {
		if s.zp, err = zstdseek.NewPool(zstdseek.DefaultBudget(0)); err != nil {
			return nil, err
		}
	}
	s.setupPacks()
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
	if err := files.MakeDirs(s.fs, dir, []string{"tmp", packDirName}, []string{kindCAS.dir(), kindAC.dir()}); err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if err := files.RemoveTemps(s.fs, s.tmpDir, s.log); err != nil {
		return nil, err
	}
	if err := s.rebuild(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.evictLocked(nil)
	// Every entry, packed ones too (those are in no recency list), as
	// Stats, and so /status, counts them.
	entries, stored := s.entries, s.bytes
	fromCheckpoint, scanned, segments := s.checkpointLoaded, s.segments.Scanned(), len(s.segments.SegmentsLocked())
	s.mu.Unlock()
	s.committer = newGroupCommit(s)
	logger.Info("cas store opened", "dir", dir, "entries", entries, "bytes", stored, "max_bytes", maxSize,
		"pack_segments", segments, "segments_scanned", scanned, "index_checkpoint", fromCheckpoint)
	return s, nil
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
	s.committer.close() // commits still queued fail with cas.ErrClosed
	s.closePacks()
	s.checkpoints.Wait()
	s.mu.Lock()
	stale := s.checkpointStaleLocked()
	s.mu.Unlock()
	if s.packMax > 0 && stale {
		// Every segment is finished now: the next start scans none.
		if err := s.writeCheckpoint(); err != nil {
			s.log.Warn("writing the index checkpoint (the next start scans every pack segment)", "err", err)
		}
	}
	err := files.RemoveTemps(s.fs, s.tmpDir, s.log)
	if uerr := s.lock.Unlock(); err == nil {
		err = uerr
	}
	return err
}

// Stats returns a snapshot of the store's counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{
		Blobs:             s.entries - s.acEntries,
		ActionResults:     s.acEntries,
		Bytes:             s.bytes,
		PartialBytes:      s.partial,
		UncompressedBytes: s.plainBytes,
		CompressedBlobs:   s.zstdEntries,
		MaxBytes:          s.maxSize,
		Evictions:         s.evictions,
		Corrupt:           s.corrupt,
		VerifiedBytes:     s.verified,
		ScrubPasses:       s.scrubPasses,
		ScrubListings:     s.scrubListings,
		Commits:           s.commits,
		CommitBatches:     s.batches,
	}
}

// EvictionGeneration counts the times entries have left the store's
// index (evicted, or removed as corrupt) since it opened: while it has
// not changed, every blob found present earlier still is. It takes no
// lock.
func (s *Store) EvictionGeneration() uint64 { return s.generation.Load() }

// EvictionAges returns how old the entries evicted since the store opened
// were, by the time they were last used (a packed entry: its segment's
// last write), and the youngest evicted in the last hour.
func (s *Store) EvictionAges() ages.Evictions {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted.Snapshot(time.Now())
}

// path is where entry k is kept plain.
func (s *Store) path(k entryKey) string { return files.Path(s.dir, k.kind.dir(), k.hash) }

// filePath is where e is kept, plain or compressed.
func (s *Store) filePath(e *entry) string {
	if e.zstd {
		return files.ZstdPath(s.dir, e.key.kind.dir(), e.key.hash, e.size)
	}
	return s.path(e.key)
}

// closePacks stops the copying forward and closes the segments
// (packs.Set.Close: the active one and those written since the last sync
// made durable).
func (s *Store) closePacks() {
	s.mu.Lock()
	if s.refreshes != nil {
		close(s.refreshes)
		s.refreshes = nil
	}
	s.mu.Unlock()
	s.segments.Close()
}

// removeFile unlinks e's file; a file already gone is no error.
func (s *Store) removeFile(e *entry) {
	if err := s.fs.Remove(s.filePath(e)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("removing", "hash", e.key.hash, "err", err)
	}
}

// contains reports whether blob d is stored (the empty blob always is),
// waiting for a commit of it to be durable, and marks it used.
func (s *Store) contains(d cas.Digest) bool {
	if d.IsEmpty() {
		return true
	}
	_, ok := s.lookup(entryKey{kindCAS, d.Hash}, d.Size)
	return ok
}

// FindMissing returns the digests in ds that are not stored, marking the
// others recently used.
func (s *Store) FindMissing(_ context.Context, ds []cas.Digest) ([]cas.Digest, error) {
	var missing []cas.Digest
	for _, d := range ds {
		if d.IsEmpty() {
			continue
		}
		if _, ok := s.lookup(entryKey{kindCAS, d.Hash}, d.Size); !ok {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
