package disk

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/zstdseek"
)

// entryKind separates the two namespaces on disk and in the index.
type entryKind uint8

const (
	kindCAS entryKind = iota // content-addressed blob, named by its own hash
	kindAC                   // action result, named by its action's hash
)

func (k entryKind) dir() string {
	if k == kindAC {
		return "ac"
	}
	return "cas"
}

type entryKey struct {
	kind entryKind
	hash string
}

type entry struct {
	// Fields are ordered largest first, so that the struct packs into
	// 128 bytes: the index holds one per stored blob.
	key    entryKey
	size   int64 // the blob's (or action result's) own size
	stored int64 // bytes on disk: size, or less if kept compressed

	// Guarded by Store.mu; see verify.go.
	checked int64      // modification time (UnixNano) of the file when this process last found it matching its name; 0: never
	check   *blobCheck // a re-hash in progress, for others to wait on
	// pending is the commit batch that put this entry in place, until its
	// rename is durable; lookups that report the entry present wait for it.
	pending *commitBatch

	// A packed entry (packs.go) is a record in seg, its data at off; nil:
	// a file of its own.
	seg *segment
	off int64
	// What every read checks (readcheck.go): a file's block sums (of the
	// file as stored, compressed or not), nil until this process has
	// hashed the file; a packed entry's record CRC (crc, below).
	sums []uint32
	// used is Store.tick when a file entry was last used: its age against
	// the oldest segment's, for eviction.
	used uint64
	// el is a file entry's place in Store.lru (its recency); nil for a
	// packed entry, whose segment's age is its own.
	el *list.Element

	gen uint32 // counts commits over this entry, so a check of a replaced file removes nothing
	crc uint32 // a packed entry's record CRC
	// verified: this process has found a packed CAS blob matching its
	// name (a segment's time says nothing of a record).
	verified bool
	zstd     bool // kept compressed (zstdblob.go), in a file named by zstdPath
}

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
	lock    *dirLock

	// noReadChecks: reads trust the disk after a blob's first check
	// (WithoutReadChecks; readcheck.go).
	noReadChecks bool

	// How blobs are compressed (WithCompression).
	policy  CompressPolicy
	zp      *zstdseek.Pool
	buffers membuf.BufferPool

	mu            sync.Mutex
	index         map[entryKey]*entry
	lru           *list.List // front: most recently used
	bytes         int64      // on disk
	plainBytes    int64      // the entries' own sizes
	zstdEntries   int64      // how many blobs are kept compressed
	partial       int64      // bytes reserved by uploads in progress (Writers); they count towards maxSize
	acEntries     int64      // how many index entries are action results
	evictions     int64
	hits          int64
	misses        int64
	corrupt       int64 // blobs whose content no longer matched their name, removed
	verified      int64 // bytes re-hashed by first reads and the scrubber
	scrubPasses   int64 // full passes of the scrubber
	scrubListings int64 // shard directories the scrubber listed
	commits       int64 // entries committed (group commit)
	batches       int64 // group commits run
	closed        bool

	committer *groupCommit

	// Packs (packs.go, segment.go); guarded by mu.
	packMax      int64      // largest entry packed; 0: none is
	segSize      int64      // bytes of slots a segment takes before it is sealed
	segments     []*segment // oldest first
	active       *segment   // takes the slots; nil until the first
	nextSeq      uint64
	tick         uint64         // counts uses and segments: the store's clock of recency
	finishing    sync.WaitGroup // segments being made durable in the background
	packsClosing bool           // Close has begun: no segment starts being made durable
	syncEvery    time.Duration  // WithPackSync: 0, records are durable when acknowledged
	unsynced     map[*segment]bool
	syncWake     chan struct{} // the syncer's: records to sync, or Close
	syncerDone   chan struct{} // closed when the syncer has made its last pass
	refreshes    chan refresh  // packed entries to copy forward out of old segments; nil once closed
	spare        []spareFile   // evicted segments' files, to be reused

	scrubClock scrubClock // wallClock, or a test's (export_test.go)
}

// OpenStore opens (creating if needed) the store in dir. maxSize is the
// number of bytes of blobs and action results kept on disk; 0 means no limit.
// It takes an exclusive lock on dir (held until Close; an error wrapping
// ErrLocked names the process holding it), removes files left in tmp/ by a
// previous run, rebuilds the index from disk and evicts down to maxSize.
// logger may be nil. Options: WithCompression.
func OpenStore(dir string, maxSize int64, logger *slog.Logger, opts ...StoreOption) (_ *Store, err error) {
	if maxSize < 0 {
		return nil, fmt.Errorf("cas: max size %d is negative", maxSize)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		dir:     dir,
		tmpDir:  filepath.Join(dir, "tmp"),
		maxSize: maxSize,
		log:     logger,
		index:   make(map[entryKey]*entry),
		lru:     list.New(),

		scrubClock: wallClock,
		packMax:    DefaultPackMax,
	}
	for _, o := range opts {
		o(s)
	}
	s.setupPacks()
	if s.zp == nil {
		if s.zp, err = zstdseek.NewPool(zstdseek.DefaultBudget(0)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cas: %w", err)
	}
	// Before anything in dir is touched: another process's tmp/ is not ours
	// to empty.
	if s.lock, err = lockDir(dir); err != nil {
		return nil, fmt.Errorf("cas: %w", err)
	}
	defer func() {
		if err != nil {
			s.lock.unlock()
		}
	}()
	if err := makeDirs(dir); err != nil {
		return nil, fmt.Errorf("cas: %w", err)
	}
	if err := s.removeTemps(); err != nil {
		return nil, err
	}
	if err := s.rebuild(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.evictLocked(nil)
	// Every entry, packed ones too (those are in no recency list), as
	// Stats, and so /status, counts them.
	entries, stored := len(s.index), s.bytes
	s.mu.Unlock()
	s.committer = newGroupCommit(s)
	logger.Info("cas store opened", "dir", dir, "entries", entries, "bytes", stored, "max_bytes", maxSize)
	return s, nil
}

// makeDirs creates tmp/ and the 256 shard directories of cas/ and ac/ that
// are missing, and syncs the parents of those it created, so that a commit
// never has to create (and make durable) a directory before its rename.
func makeDirs(dir string) error {
	for _, sub := range []string{"tmp", packDirName} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	for _, kind := range []entryKind{kindCAS, kindAC} {
		top := filepath.Join(dir, kind.dir())
		if err := os.MkdirAll(top, 0o755); err != nil {
			return err
		}
		created := false
		for i := range 256 {
			err := os.Mkdir(filepath.Join(top, fmt.Sprintf("%02x", i)), 0o755)
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			created = created || err == nil
		}
		if created {
			if err := syncDir(top); err != nil {
				return err
			}
		}
	}
	return syncDir(dir)
}

// syncDir makes the entries of directory dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeTemps deletes whatever a previous run left in tmp/: uploads that
// never completed.
func (s *Store) removeTemps() error {
	ents, err := os.ReadDir(s.tmpDir)
	if err != nil {
		return fmt.Errorf("cas: %w", err)
	}
	for _, e := range ents {
		p := filepath.Join(s.tmpDir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("cas: removing stray temporary file: %w", err)
		}
		s.log.Info("removed stray temporary file", "path", p)
	}
	return nil
}

// rebuild fills the index from cas/ and ac/, oldest modification first.
func (s *Store) rebuild() error {
	type found struct {
		e     *entry
		mtime time.Time
	}
	var all []found
	for _, kind := range []entryKind{kindCAS, kindAC} {
		root := filepath.Join(s.dir, kind.dir())
		shards, err := os.ReadDir(root)
		if err != nil {
			return fmt.Errorf("cas: %w", err)
		}
		for _, shard := range shards {
			if !shard.IsDir() {
				s.log.Warn("ignoring unexpected file in store", "path", filepath.Join(root, shard.Name()))
				continue
			}
			files, err := os.ReadDir(filepath.Join(root, shard.Name()))
			if err != nil {
				return fmt.Errorf("cas: %w", err)
			}
			for _, f := range files {
				name := f.Name()
				p := filepath.Join(root, shard.Name(), name)
				hash, size, zstd, ok := parseStoredName(name)
				if !ok || zstd && kind != kindCAS || hash[:2] != shard.Name() || !f.Type().IsRegular() {
					s.log.Warn("ignoring unexpected file in store", "path", p)
					continue
				}
				info, err := f.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				if err != nil {
					return fmt.Errorf("cas: %w", err)
				}
				if !zstd {
					size = info.Size()
				}
				e := &entry{key: entryKey{kind, hash}, size: size, stored: info.Size(), zstd: zstd}
				all = append(all, found{e, info.ModTime()})
			}
		}
	}
	slices.SortFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range all {
		if el, ok := s.index[f.e.key]; ok {
			// Kept both ways: a crash between a commit's rename and its
			// removal of the other form. Both were checked; keep the
			// newer.
			old := el
			s.log.Info("blob stored both plain and compressed: keeping the newer", "hash", old.key.hash)
			s.removeLocked(el)
		}
		s.insertLocked(f.e)
	}
	records, err := s.loadSegments()
	if err != nil {
		return err
	}
	// Recency: files' last modification and segments' order, on one clock
	// (files older than the oldest segment first), so that eviction takes
	// the older of the two kinds.
	s.tick = 0
	si := 0
	for _, f := range all {
		for si < len(s.segments) && s.segmentTime(s.segments[si]).Before(f.mtime) {
			s.tick++
			s.segments[si].created = s.tick
			si++
		}
		s.tick++
		if el, ok := s.index[f.e.key]; ok && el == f.e {
			f.e.used = s.tick
		}
	}
	for ; si < len(s.segments); si++ {
		s.tick++
		s.segments[si].created = s.tick
	}
	// Records in segment order: a later record of a key replaces an
	// earlier one (an action result updated, a blob written again), and a
	// packed entry replaces a file of the same key (written since).
	for _, r := range records {
		if entryKind(r.Kind) > kindAC {
			s.log.Warn("ignoring a pack record of unknown kind", "segment", r.seg.seq, "kind", r.Kind)
			continue
		}
		k := entryKey{entryKind(r.Kind), r.HashHex()}
		if el, ok := s.index[k]; ok {
			s.removeLocked(el)
		}
		e := &entry{key: k, size: r.Size, stored: r.Size, seg: r.seg, off: r.Off, crc: r.DataCRC}
		s.insertLocked(e)
		r.seg.keys = append(r.seg.keys, k)
	}
	return nil
}

// segmentTime is when seg's file was last written, for ordering it among
// files at start.
func (s *Store) segmentTime(seg *segment) time.Time {
	fi, err := seg.f.Stat()
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// parseStoredName parses the name of a file in cas/ or ac/: a hash, or a
// hash and a size followed by .zst for a blob kept compressed.
func parseStoredName(name string) (hash string, size int64, zstd, ok bool) {
	if cas.CheckHash(name) == nil {
		return name, 0, false, true
	}
	rest, found := strings.CutSuffix(name, ".zst")
	if !found || len(rest) < cas.HashLen+2 || rest[cas.HashLen] != '-' || cas.CheckHash(rest[:cas.HashLen]) != nil {
		return "", 0, false, false
	}
	size, err := cas.ParseSize(rest[cas.HashLen+1:])
	if err != nil || size == 0 {
		return "", 0, false, false
	}
	return rest[:cas.HashLen], size, true, true
}

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
	err := s.removeTemps()
	if uerr := s.lock.unlock(); err == nil {
		err = uerr
	}
	return err
}

// Stats returns a snapshot of the store's counters.
func (s *Store) Stats() cas.StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cas.StoreStats{
		Blobs:             int64(len(s.index)) - s.acEntries,
		ActionResults:     s.acEntries,
		Bytes:             s.bytes,
		PartialBytes:      s.partial,
		UncompressedBytes: s.plainBytes,
		CompressedBlobs:   s.zstdEntries,
		MaxBytes:          s.maxSize,
		Evictions:         s.evictions,
		Hits:              s.hits,
		Misses:            s.misses,
		Corrupt:           s.corrupt,
		VerifiedBytes:     s.verified,
		ScrubPasses:       s.scrubPasses,
		ScrubListings:     s.scrubListings,
		Commits:           s.commits,
		CommitBatches:     s.batches,
	}
}

// MaxSize returns the configured maximum size; 0 means no limit.
func (s *Store) MaxSize() int64 { return s.maxSize }

// path is where entry k is kept plain.
func (s *Store) path(k entryKey) string {
	return filepath.Join(s.dir, k.kind.dir(), k.hash[:2], k.hash)
}

// filePath is where e is kept, plain or compressed.
func (s *Store) filePath(e *entry) string {
	if e.zstd {
		return s.zstdPath(e.key, e.size)
	}
	return s.path(e.key)
}

// zstdPath is where the blob k of size bytes is kept compressed. The size
// is in the name so that the index can be rebuilt without opening files.
func (s *Store) zstdPath(k entryKey, size int64) string {
	return s.path(k) + "-" + strconv.FormatInt(size, 10) + ".zst"
}

// closePacks makes the active segment durable if no writer holds a slot
// in it (else the next start checks it), waits for the segments being made
// durable, and closes the segments' files (a reader still holding one
// closes it).
func (s *Store) closePacks() {
	s.mu.Lock()
	if seg := s.active; seg != nil && seg.open == 0 {
		s.sealLocked(seg)
	}
	s.packsClosing = true // no segment starts being finished from here on
	stopSyncer := s.syncerDone != nil
	if stopSyncer {
		s.wakeSyncer()
	}
	if s.refreshes != nil {
		close(s.refreshes)
		s.refreshes = nil
	}
	s.mu.Unlock()
	if stopSyncer {
		<-s.syncerDone // its last pass makes every record durable
	}
	s.finishing.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segments {
		seg.closed = true // to the readers: close the file when done
		if seg.readers == 0 {
			seg.gone = true
			seg.f.Close()
		}
	}
	for _, sp := range s.spare {
		sp.f.Close() // the file stays, a spare for the next start
	}
	s.spare = nil
}

// removeFile unlinks e's file; a file already gone is no error.
func (s *Store) removeFile(e *entry) {
	if err := os.Remove(s.filePath(e)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("removing", "hash", e.key.hash, "err", err)
	}
}

// lookup finds k, marks it most recently used and counts a hit or a miss.
// For CAS blobs, a digest whose size differs from the stored file's is a
// different blob and so a miss.
// Internal checks (is an upload already complete? are an action result's
// outputs present?) pass count=false so the counters measure clients' lookups.
func (s *Store) lookup(k entryKey, size int64, count bool) (entry, bool) {
	e, ok := s.lookupPending(k, size, count)
	if e.pending != nil {
		// Just committed: report it once its rename is durable, so that
		// no client is told of an entry a crash could still take away.
		<-e.pending.durable
	}
	return e, ok
}

// lookupPending is lookup without the wait: it returns a copy of the
// entry, whose pending is the batch whose commit of it is not yet
// durable, if any.
func (s *Store) lookupPending(k entryKey, size int64, count bool) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.index[k]
	if ok && (k.kind == kindAC || el.size == size) {
		e := el
		s.tick++
		if e.seg == nil {
			s.lru.MoveToFront(e.el)
			e.used = s.tick
		} else {
			s.refreshIfOldLocked(el)
		}
		if count {
			s.hits++
		}
		return *e, true
	}
	if count {
		s.misses++
	}
	return entry{}, false
}

// Contains reports whether blob d is stored (the empty blob always is),
// without counting a hit or miss: a check of the server's own.
func (s *Store) Contains(_ context.Context, d cas.Digest) (bool, error) {
	return s.contains(d), nil
}

func (s *Store) contains(d cas.Digest) bool {
	if d.IsEmpty() {
		return true
	}
	_, ok := s.lookup(entryKey{kindCAS, d.Hash}, d.Size, false)
	return ok
}

// Resolve returns the digest of the stored blob whose hash is hash, or an
// error wrapping ErrNotFound. The index is keyed by hash, so this is one
// map lookup; a blob whose commit is not yet durable is waited for, as a
// lookup by digest waits.
func (s *Store) Resolve(_ context.Context, hash string) (cas.Digest, error) {
	if hash == cas.EmptyHash {
		return cas.Digest{Hash: hash}, nil
	}
	k := entryKey{kindCAS, hash}
	s.mu.Lock()
	el, ok := s.index[k]
	var e entry
	if ok {
		e = *el
	}
	s.mu.Unlock()
	if !ok {
		return cas.Digest{}, fmt.Errorf("%w: blob %s", cas.ErrNotFound, hash)
	}
	if e.pending != nil {
		<-e.pending.durable
	}
	return cas.Digest{Hash: hash, Size: e.size}, nil
}

// Has reports whether the blob d is stored (the empty blob always is) and
// marks it recently used; a client's lookup.
func (s *Store) Has(d cas.Digest) bool {
	if d.IsEmpty() {
		return true
	}
	_, ok := s.lookup(entryKey{kindCAS, d.Hash}, d.Size, true)
	return ok
}

// FindMissing returns the digests in ds that are not stored, marking the
// others recently used.
func (s *Store) FindMissing(_ context.Context, ds []cas.Digest, lookup cas.Lookup) ([]cas.Digest, error) {
	var missing []cas.Digest
	for _, d := range ds {
		if d.IsEmpty() {
			continue
		}
		if _, ok := s.lookup(entryKey{kindCAS, d.Hash}, d.Size, bool(lookup)); !ok {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

// Blob is an open stored blob. Reads at an offset use pread (ReadAt), so an
// offset read never reads and discards. The open file keeps the data
// readable even if the blob is evicted meanwhile (POSIX keeps an unlinked
// file's data until its last descriptor closes).
type Blob struct {
	f    *os.File // nil for the empty blob
	size int64
	zp   *zstdseek.Pool // for ReadZstd
	// checked reads f block by block against its sums (readcheck.go);
	// nil: reads are not checked (the empty blob, WithoutReadChecks).
	checked *checkedFile
}

// Size returns the blob's size in bytes.
func (b *Blob) Size() int64 { return b.size }

// ReadChunks reads [off, end) with pread, one chunk at a time into a buffer
// from pool; see BlobReader.
func (b *Blob) ReadChunks(_ context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if b.checked != nil {
		return b.checked.ReadChunks(off, end, pool, chunkSize, fn)
	}
	return cas.ReadChunks(b, off, end, pool, chunkSize, fn)
}

// Stored returns Uncompressed: the blob is kept plain.
func (b *Blob) Stored() cas.Encoding { return cas.Uncompressed }

// ReadZstd compresses the blob from off as it reads it (zstdfile.CompressChunks).
func (b *Blob) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return zstdfile.CompressChunks(ctx, b.zp, b, off, pool, chunkSize, fn)
}

// ReadAt implements io.ReaderAt.
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	switch {
	case b.f == nil:
		return 0, io.EOF
	case b.checked != nil:
		return b.checked.ReadAt(p, off)
	}
	return b.f.ReadAt(p, off)
}

// Close releases the file.
func (b *Blob) Close() error {
	if b.f == nil {
		return nil
	}
	return b.f.Close()
}

// Open opens blob d for reading, a *Blob. It returns an error wrapping
// ErrNotFound if the blob is not stored. The caller must Close it.
func (s *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.IsEmpty() {
		return &Blob{zp: s.zp}, nil
	}
	return s.open(ctx, entryKey{kindCAS, d.Hash}, d.Size, true)
}

// OpenUncounted is Open for the server's own reads, such as copying a blob
// to another tier: the lookup is not counted in Stats.
func (s *Store) OpenUncounted(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.IsEmpty() {
		return &Blob{zp: s.zp}, nil
	}
	return s.open(ctx, entryKey{kindCAS, d.Hash}, d.Size, false)
}

// open opens entry k. A blob not yet verified in this process is re-hashed
// first (verify.go): what it returns has matched its name. count says
// whether the lookup is a client's.
func (s *Store) open(ctx context.Context, k entryKey, size int64, count bool) (cas.BlobReader, error) {
	if s.isClosed() {
		return nil, cas.ErrClosed
	}
	var e entry
	var f *os.File
	var sums []uint32
	// A blob can be committed again, in the other form (plain or
	// compressed), between its lookup and its open: then its file is gone,
	// or the check finds the entry replaced, and the lookup is done again.
	for attempt := 0; ; attempt++ {
		// A read need not wait for the entry's rename to be durable: its
		// content is, and a reader that outlives a crash is no more.
		var ok bool
		e, ok = s.lookupPending(k, size, count && attempt == 0)
		if !ok {
			return nil, cas.ErrNotFound
		}
		if e.seg != nil {
			b, err := s.openPacked(ctx, e)
			switch {
			case err == nil:
				return b, nil
			case errors.Is(err, errReplaced) && attempt < 2:
				continue
			case errors.Is(err, errReplaced):
				return nil, cas.ErrNotFound // replaced or evicted under us, again and again
			}
			return nil, err
		}
		var err error
		f, err = os.Open(s.filePath(&e))
		if errors.Is(err, fs.ErrNotExist) {
			if attempt < 2 {
				continue
			}
			return nil, cas.ErrNotFound // evicted between the lookup and the open
		}
		if err != nil {
			return nil, err
		}
		if k.kind == kindAC {
			// An action result can be replaced by one of another size
			// between the lookup and the open: the open file is the one
			// to believe.
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, err
			}
			e.size = fi.Size()
			// Its sums, if this process wrote it; one written before
			// the start has no name to be checked against, and none.
			sums = s.actionResultSums(e, fi)
			break
		}
		sums, err = s.checkBlob(ctx, e, f, false, nil)
		if err == nil {
			break
		}
		f.Close()
		if !errors.Is(err, errReplaced) || attempt >= 2 {
			// Found corrupt (ErrNotFound), or the check could not finish.
			return nil, err
		}
	}
	var checked *checkedFile
	if sums != nil && !s.noReadChecks {
		checked = &checkedFile{f: f, size: e.stored, sums: sums, s: s, opened: e}
	}
	if e.zstd {
		b, err := zstdfile.Open(f, e.size, s.zp)
		if errors.Is(err, zstdseek.ErrSeekTable) {
			// It matched its name when checked: the disk changed it.
			return nil, s.readFailed(e, err.Error())
		}
		if err != nil {
			s.log.Error("compressed blob unreadable", "hash", k.hash, "err", err)
			return nil, fmt.Errorf("cas: blob %s: %w", k.hash, err)
		}
		if checked != nil {
			b.SetStoredReader(checked.ReadChunks)
		}
		return b, nil
	}
	return &Blob{f: f, size: e.size, zp: s.zp, checked: checked}, nil
}

// actionResultSums returns the block sums of the action result file of e,
// open with fi, if its entry has sums and is still that file (same
// generation and size); nil otherwise.
func (s *Store) actionResultSums(e entry, fi os.FileInfo) []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.index[e.key]; ok {
		if cur := el; cur.gen == e.gen && cur.seg == nil && cur.stored == fi.Size() {
			return cur.sums
		}
	}
	return nil
}

// ReadAll returns the whole content of blob d.
func (s *Store) ReadAll(ctx context.Context, d cas.Digest) ([]byte, error) {
	if d.IsEmpty() {
		return []byte{}, nil
	}
	return s.readAll(ctx, entryKey{kindCAS, d.Hash}, d.Size)
}

func (s *Store) readAll(ctx context.Context, k entryKey, size int64) ([]byte, error) {
	r, err := s.open(ctx, k, size, true)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rd io.ReaderAt
	switch b := r.(type) {
	case *zstdfile.Blob:
		return b.ReadAll(ctx, s.buffers)
	case *packedBlob:
		rd = b
	default:
		rd = b.(*Blob)
	}
	buf := make([]byte, r.Size())
	if _, err := rd.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("cas: reading %s: %w", k.hash, err)
	}
	return buf, nil
}

// Put stores data as blob d after checking that it matches d. Storing a blob
// that is already present succeeds (after the check: bad data for a stored
// digest is still ErrMismatch).
func (s *Store) Put(_ context.Context, d cas.Digest, data []byte, arrived cas.Encoding) error {
	pieces := net.Buffers{data}
	if err := checkData(d, pieces); err != nil {
		return err
	}
	if s.contains(d) {
		return nil
	}
	if s.maxSize > 0 && d.Size > s.maxSize {
		return fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
	}
	c, err := s.writeBlob(d, pieces, arrived)
	if err != nil {
		return err
	}
	s.committer.commit(c)
	return c.err
}

// writeBlob writes data, checked, to a temporary file, compressed if the
// store's policy and the data say so, and returns it ready to commit as
// blob d.
func (s *Store) writeBlob(d cas.Digest, data net.Buffers, arrived cas.Encoding) (*pendingCommit, error) {
	if s.packs(d.Size) {
		return s.writeRecord(entryKey{kindCAS, d.Hash}, data)
	}
	f, err := s.createTemp()
	if err != nil {
		return nil, err
	}
	e := &entry{key: entryKey{kindCAS, d.Hash}, size: d.Size, stored: d.Size}
	if s.policy.compresses(arrived) {
		c := zstdseek.NewFrameCompressor(s.zp, s.buffers)
		sf := summingFile{f, newBlockSums(d.Size)}
		for _, p := range data {
			if err = c.Write(sf, p); err != nil {
				break
			}
		}
		if err == nil {
			var stored int64
			e.zstd, stored, err = c.Finish(sf)
			if e.zstd {
				e.stored = stored
			}
		}
		c.Free()
		e.sums = sf.sums.finish()
	} else {
		_, err = writeBuffers(f, data)
		e.sums = sumsOf(data)
	}
	if err != nil {
		discardTemp(f)
		return nil, err
	}
	return s.pendingCommit(f, e, 0), nil
}

// PutBatch stores each data[i], the bytes of blob ds[i] in pieces (written
// in order, as writev writes them: a blob received in several buffers is
// stored without joining them), as Put does, with one group commit for all
// of them: the batch costs one round of fsyncs, not one per blob, and no
// goroutine per blob. It returns one error per blob (nil: the blob is
// stored, durably). It is done with data when it returns.
// arrived says how each blob arrived; nil: all Uncompressed.
func (s *Store) PutBatch(_ context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	errs := make([]error, len(ds))
	var commits []*pendingCommit
	var which []int // index in ds of each commit
	for i, d := range ds {
		if err := checkData(d, data[i]); err != nil {
			errs[i] = err
			continue
		}
		if s.contains(d) {
			continue
		}
		if s.maxSize > 0 && d.Size > s.maxSize {
			errs[i] = fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
			continue
		}
		form := cas.Uncompressed
		if arrived != nil {
			form = arrived[i]
		}
		c, err := s.writeBlob(d, data[i], form)
		if err != nil {
			errs[i] = err
			continue
		}
		commits = append(commits, c)
		which = append(which, i)
	}
	if len(commits) > 0 {
		s.committer.commit(commits...)
	}
	for j, c := range commits {
		errs[which[j]] = c.err
	}
	return errs
}

// checkData checks data, a blob's bytes in pieces, against d: its size,
// then its hash.
func checkData(d cas.Digest, data net.Buffers) error {
	var n int64
	for _, p := range data {
		n += int64(len(p))
	}
	switch {
	case n > d.Size:
		return fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, d.Size)
	case n < d.Size:
		return fmt.Errorf("%w: received %d bytes, the digest says %d", cas.ErrMismatch, n, d.Size)
	}
	var sum [sha256.Size]byte
	if len(data) == 1 {
		sum = sha256.Sum256(data[0]) // no hasher to allocate
	} else {
		h := sha256.New()
		for _, p := range data {
			h.Write(p)
		}
		h.Sum(sum[:0])
	}
	if got := hex.EncodeToString(sum[:]); got != d.Hash {
		return fmt.Errorf("%w: content hashes to %s, the digest says %s", cas.ErrMismatch, got, d.Hash)
	}
	return nil
}

// GetActionResult returns the serialized ActionResult stored for the action
// digest d, or an error wrapping ErrNotFound.
func (s *Store) GetActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	return s.readAll(ctx, entryKey{kindAC, d.Hash}, 0)
}

// PutActionResult stores data, a serialized ActionResult, for the action
// digest d, replacing any earlier entry.
func (s *Store) PutActionResult(_ context.Context, d cas.Digest, data []byte) error {
	if s.maxSize > 0 && int64(len(data)) > s.maxSize {
		return fmt.Errorf("action result of %d bytes: %w", len(data), cas.ErrTooLarge)
	}
	k := entryKey{kindAC, d.Hash}
	if s.packs(int64(len(data))) {
		c, err := s.writeRecord(k, net.Buffers{data})
		if err != nil {
			return err
		}
		s.committer.commit(c)
		return c.err
	}
	return s.putFile(k, data)
}

// putFile writes data to a temporary file and commits it as k.
func (s *Store) putFile(k entryKey, data []byte) error {
	f, err := s.createTemp()
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		discardTemp(f)
		return err
	}
	n := int64(len(data))
	return s.commitTemp(f, &entry{key: k, size: n, stored: n, sums: sumsOf(net.Buffers{data})}, 0)
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Store) createTemp() (*os.File, error) {
	if s.isClosed() {
		return nil, cas.ErrClosed
	}
	return os.CreateTemp(s.tmpDir, "upload-*")
}

// discardTemp closes and removes a temporary file.
func discardTemp(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// commitTemp makes the temporary file f, whose content is complete and
// checked, the entry k, durably: through the group commit (groupcommit.go),
// which fsyncs f, renames it into place, indexes the entry, evicts down to
// the maximum size and fsyncs the directory, for every file committed at
// about the same time at once. reserved is what a Writer reserved for f's
// bytes: it becomes the entry's size in the same locked step, or is
// released on error. On error f is removed.
func (s *Store) commitTemp(f *os.File, e *entry, reserved int64) error {
	c := s.pendingCommit(f, e, reserved)
	s.committer.commit(c)
	return c.err
}

// pendingCommit prepares f for the group commit as entry e (its key, sizes
// and form), which the commit takes over.
func (s *Store) pendingCommit(f *os.File, e *entry, reserved int64) *pendingCommit {
	// The content was checked on its way in: as of this modification time
	// it is verified (verify.go). Without it, the first read re-hashes.
	if fi, err := f.Stat(); err == nil {
		e.checked = fi.ModTime().UnixNano()
	}
	return &pendingCommit{f: f, e: e, reserved: reserved}
}

// indexCommittedLocked indexes e, just renamed into place by batch b, as
// the most recently used, and evicts down to the maximum size. An entry
// kept in the other form (plain or compressed) is replaced and its file
// removed.
func (s *Store) indexCommittedLocked(e *entry, b *commitBatch) {
	if el, ok := s.index[e.key]; ok {
		// The entry keeps its identity (checks in progress hold it) and
		// takes the new form: a file (plain or compressed) or a record.
		old := el
		if old.seg == nil && (e.seg != nil || s.filePath(old) != s.filePath(e)) {
			s.removeFile(old)
		}
		s.uncountLocked(old)
		wasFile := old.seg == nil
		old.size, old.stored, old.zstd = e.size, e.stored, e.zstd
		old.checked, old.seg, old.off, old.verified = e.checked, e.seg, e.off, e.verified
		old.crc, old.sums = e.crc, e.sums
		old.gen++
		old.pending = b
		s.countLocked(old)
		s.tick++
		switch {
		case old.seg != nil && wasFile:
			s.lru.Remove(old.el) // out of the files' recency
			old.el = nil
		case old.seg == nil && !wasFile:
			old.el = s.lru.PushFront(old)
		case old.seg == nil:
			s.lru.MoveToFront(old.el)
		}
		old.used = s.tick
	} else {
		e.pending = b
		s.insertLocked(e)
	}
	s.evictLocked(s.index[e.key])
}

// insertLocked adds a new entry as the most recently used.
func (s *Store) insertLocked(e *entry) {
	if e.seg == nil {
		// Packed entries are in no list: their segment's age is theirs.
		s.tick++
		e.used = s.tick
		e.el = s.lru.PushFront(e)
	}
	s.index[e.key] = e
	s.countLocked(e)
}

// countLocked adds e to the store's totals; uncountLocked takes it out.
// A packed entry's bytes are its segment's, counted when it took its slot.
func (s *Store) countLocked(e *entry) {
	if e.seg == nil {
		s.bytes += e.stored
	}
	s.plainBytes += e.size
	if e.zstd {
		s.zstdEntries++
	}
	if e.key.kind == kindAC {
		s.acEntries++
	}
}

func (s *Store) uncountLocked(e *entry) {
	if e.seg == nil {
		s.bytes -= e.stored
	}
	s.plainBytes -= e.size
	if e.zstd {
		s.zstdEntries--
	}
	if e.key.kind == kindAC {
		s.acEntries--
	}
}

// evictLocked removes the least recently used entries until they and the
// uploads in progress fit the maximum size: of the least recently used
// file and the oldest pack segment (sealed, no writer in it), the older
// goes, the segment whole. keep, if not nil, is never evicted (the entry
// just written).
func (s *Store) evictLocked(keep *entry) {
	if s.maxSize <= 0 {
		return
	}
	for s.bytes+s.partial > s.maxSize {
		el := s.lru.Back()
		if el != nil && el.Value.(*entry) == keep {
			el = el.Prev()
		}
		seg := s.oldestEvictableLocked()
		if seg != nil && (el == nil || seg.created < el.Value.(*entry).used) {
			s.evictSegmentLocked(seg)
			continue
		}
		if el == nil {
			return
		}
		e := el.Value.(*entry)
		s.removeLocked(e)
		s.evictions++
		s.log.Debug("evicted", "kind", e.key.kind.dir(), "hash", e.key.hash, "size", e.size)
	}
}

// Writer writes one blob: content goes to a temporary file and is hashed as
// it streams; Commit checks size and hash and only then makes the blob
// visible. A Writer is not safe for concurrent use.
//
// The bytes it writes count towards the store's maximum size from the
// moment they are written (reserved ahead, in steps of reserveStep, so
// that a stream of small writes does not take the store's lock for each):
// uploads in progress evict stored entries like committed ones do, and can
// never take the disk past the maximum size.
type Writer struct {
	s        *Store
	d        cas.Digest
	f        *os.File // nil while suspended
	name     string   // the temporary file's path
	h        hash.Hash
	n        int64
	reserved int64 // bytes of s.partial this writer holds, >= n
	end      bool
	// z compresses the blob into frames, if the store keeps blobs that
	// arrived as this one did compressed; nil otherwise. Its frame being
	// filled stays in memory while the writer is suspended.
	z *zstdseek.FrameCompressor
	// sums takes the block sums of the content as it arrives: what is on
	// disk, unless z ends up keeping it compressed (readcheck.go).
	sums *blockSums
}

// reserveStep is how far ahead of what it has written a Writer reserves.
const reserveStep = 1 << 20

// NewWriter starts writing blob d, a *Writer. If the store's policy keeps
// blobs that arrived as arrived compressed, the writer compresses as it
// writes, unless the first frame shows the blob does not compress. The
// caller must call Commit or Abort.
func (s *Store) NewWriter(_ context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if s.maxSize > 0 && d.Size > s.maxSize {
		return nil, fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
	}
	if s.packs(d.Size) {
		return s.newPackWriter(d)
	}
	f, err := s.createTemp()
	if err != nil {
		return nil, err
	}
	w := &Writer{s: s, d: d, f: f, name: f.Name(), h: sha256.New(), sums: newBlockSums(d.Size)}
	if s.policy.compresses(arrived) {
		c := zstdseek.NewFrameCompressor(s.zp, s.buffers)
		w.z = &c
	}
	return w, nil
}

// reserve counts n more bytes of uploads in progress towards the maximum
// size, evicting stored entries to make room. If the uploads in progress
// alone would take more than the maximum size it fails with ErrFull.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cas.ErrClosed
	}
	if s.maxSize > 0 && s.partial+n > s.maxSize {
		return fmt.Errorf("%w (%d of %d bytes)", cas.ErrFull, s.partial, s.maxSize)
	}
	s.partial += n
	s.evictLocked(nil)
	return nil
}

// unreserve gives back n bytes reserved.
func (s *Store) unreserve(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.partial -= n
	s.mu.Unlock()
}

// Digest returns the digest the writer was started with.
func (w *Writer) Digest() cas.Digest { return w.d }

// Written returns the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// file returns the temporary file, opening it again (for appending) if the
// writer was suspended.
func (w *Writer) file() (*os.File, error) {
	if w.f == nil {
		f, err := os.OpenFile(w.name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, fmt.Errorf("cas: resuming an upload: %w", err)
		}
		w.f = f
	}
	return w.f, nil
}

// Write appends p. Writing past the digest's size fails with ErrMismatch
// and writes nothing; so does one the store has no room for (ErrFull).
func (w *Writer) Write(p []byte) (int, error) {
	f, err := w.prepare(int64(len(p)))
	if err != nil {
		return 0, err
	}
	if w.z != nil {
		if err := w.z.Write(summingFile{f, w.sums}, p); err != nil {
			return 0, err
		}
		w.h.Write(p)
		w.n += int64(len(p))
		return len(p), nil
	}
	n, err := f.Write(p)
	w.h.Write(p[:n])
	w.sums.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// WriteBuffers appends each of bufs in turn, as Write would, with one
// vectored write (writev) for them all: a ByteStream request arrives as one
// buffer per 16 KiB HTTP/2 frame, and one system call per frame cost more
// CPU than the copy into the page cache (docs/zerocopy.md). It returns the
// bytes written; on error the writer holds those and no more.
func (w *Writer) WriteBuffers(bufs [][]byte) (int64, error) {
	if w.z != nil {
		// Compressed as it goes: the frames go through the compressor.
		var total int64
		for _, b := range bufs {
			n, err := w.Write(b)
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	f, err := w.prepare(total)
	if err != nil {
		return 0, err
	}
	n, err := writeBuffers(f, bufs)
	for rest := n; rest > 0; bufs = bufs[1:] { // hash what was written
		k := min(rest, len(bufs[0]))
		w.h.Write(bufs[0][:k])
		w.sums.Write(bufs[0][:k])
		rest -= k
	}
	w.n += int64(n)
	return int64(n), err
}

// prepare checks that n more bytes may be written, reserves room for them
// and returns the file to write them to.
func (w *Writer) prepare(n int64) (*os.File, error) {
	if w.end {
		return nil, errors.New("cas: write after Commit or Abort")
	}
	if n > w.d.Size-w.n {
		return nil, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	if need := w.n + n; need > w.reserved {
		ahead := min(max(need, w.reserved+reserveStep), w.d.Size)
		if err := w.s.reserve(ahead - w.reserved); err != nil {
			return nil, err
		}
		w.reserved = ahead
	}
	return w.file()
}

// Suspend closes the temporary file until the next Write or Commit, and
// gives back what was reserved ahead of what was written: an upload kept
// idle for resumption holds no descriptor and only its own bytes.
func (w *Writer) Suspend() error {
	if w.end {
		return nil
	}
	w.s.unreserve(w.reserved - w.n)
	w.reserved = w.n
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Commit checks that the content matches the digest, then fsyncs it and
// makes it visible. On a mismatch or any other error nothing is stored and
// the temporary file is removed.
func (w *Writer) Commit(context.Context) error {
	if w.end {
		return errors.New("cas: Commit after Commit or Abort")
	}
	if w.n != w.d.Size {
		w.Abort()
		return fmt.Errorf("%w: received %d bytes, the digest says %d", cas.ErrMismatch, w.n, w.d.Size)
	}
	if got := hex.EncodeToString(w.h.Sum(nil)); got != w.d.Hash {
		w.Abort()
		return fmt.Errorf("%w: content hashes to %s, the digest says %s", cas.ErrMismatch, got, w.d.Hash)
	}
	f, err := w.file() // fsync needs a descriptor
	if err != nil {
		w.Abort()
		return err
	}
	e := &entry{key: entryKey{kindCAS, w.d.Hash}, size: w.n, stored: w.n}
	if w.z != nil {
		zstd, stored, err := w.z.Finish(summingFile{f, w.sums})
		if err != nil {
			w.Abort()
			return err
		}
		if zstd {
			e.zstd, e.stored = true, stored
		}
		w.freeFrames()
	}
	e.sums = w.sums.finish() // of the file as written, frames or plain
	w.end = true
	return w.s.commitTemp(f, e, w.reserved)
}

// freeFrames gives back the compressor's buffers.
func (w *Writer) freeFrames() {
	if w.z != nil {
		w.z.Free()
		w.z = nil
	}
}

// Abort discards the upload. It is safe to call after Commit (it does
// nothing then).
func (w *Writer) Abort() {
	if w.end {
		return
	}
	w.end = true
	w.freeFrames()
	if w.f != nil {
		w.f.Close()
	}
	os.Remove(w.name)
	w.s.unreserve(w.reserved)
}
