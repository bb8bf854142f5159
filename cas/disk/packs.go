package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"path/filepath"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/zstdfile"
)

// Small blobs and action results are packed into segment files
// (segment.go, package packfile) instead of getting a file each: a file costs
// about 50 µs of CPU per blob (create, write, fsync, rename, directory
// fsync, close, and an unlink at eviction) and, on a journaled filesystem,
// a journal commit of its own, which is most of what a build uploads.
// Larger blobs stay files, so their reads stay zero-copy from the page
// cache with an fd each and their eviction stays least-recently-used.
const (
	// DefaultPackMax is the largest blob packed by default: above it a
	// file's fixed cost is under 5% of writing its bytes.
	DefaultPackMax = 1 << 20
	// MaxPackMax is the most WithPacks takes: what the scrubber and the
	// copying forward hash in one buffer.
	MaxPackMax = hashChunkSize
	// defaultSegmentSize is the size of a pack segment: the unit of
	// eviction, so it is kept small beside the store (at most a 16th of
	// its maximum size).
	defaultSegmentSize = 64 << 20
	// minSegmentSize: a store too small for segments this size (16 of
	// them) keeps every blob in a file of its own.
	minSegmentSize = 1 << 20
)

// WithPacks packs blobs and action results of at most maxBlob bytes into
// segment files (docs/cas.md, "Small blobs"); larger ones are files of
// their own. Without it, maxBlob is DefaultPackMax; 0 keeps everything in
// files; more than MaxPackMax is MaxPackMax. A store whose maximum size is
// under 16 MiB keeps everything in files whatever maxBlob is: its segments
// would be the size of its blobs.
// Packed blobs are kept uncompressed, whatever the compression policy.
func WithPacks(maxBlob int64) StoreOption {
	return func(s *Store) { s.packMax = max(maxBlob, 0) }
}

// packable reports whether an entry of size bytes is packed.
func (s *Store) packable(size int64) bool {
	return s.packMax > 0 && size <= s.packMax
}

// setupPacks fixes the segment size from the maximum size, and turns
// packing off for a store too small for it.
func (s *Store) setupPacks() {
	s.segSize = defaultSegmentSize
	if s.maxSize > 0 {
		s.segSize = min(s.segSize, s.maxSize/16)
	}
	if s.segSize < minSegmentSize {
		s.packMax = 0
	}
	// A quarter of a segment at most, and MaxPackMax.
	s.packMax = min(s.packMax, s.segSize/4, MaxPackMax)
	cfg := packs.Config{
		Dir: filepath.Join(s.dir, packDirName), Log: s.log, Mu: &s.mu,
		SegmentSize: s.segSize, MaxRecord: s.packMax,
		Tick: func() uint64 { s.tick++; return s.tick },
	}
	if s.packMax > 0 {
		s.refreshes = make(chan refresh, refreshQueue)
		go s.refreshLoop(s.refreshes)
		cfg.SyncEvery = s.syncEvery
	}
	s.segments = packs.NewSet(cfg)
}

// WithPackSync makes packed records durable every interval instead of
// before each commit is acknowledged: a commit returns once its record is
// written (to the page cache) and indexed, and a goroutine fdatasyncs the
// segments written since its last pass every interval (and at Close).
// Writes of small blobs then cost no fsync wait: on a journaled filesystem
// that is most of their time. The price (docs/cas.md, "Small blobs"): a
// crash of the machine (not of the process: the page cache survives that)
// may lose records acknowledged in the last interval; at the next start
// they fail their CRC check and are missing, never served. Blobs over the
// pack size are files, durable before they are acknowledged, either way.
// 0 (the default) syncs before acknowledging.
func WithPackSync(interval time.Duration) StoreOption {
	return func(s *Store) { s.syncEvery = max(interval, 0) }
}

// packedBlob is an open packed blob: a range of its segment's file, read
// with pread. It keeps the segment's file open until Close, even if the
// segment is evicted meanwhile.
type packedBlob struct {
	s    *Store
	seg  *packs.Segment
	off  int64 // of the data in the segment
	size int64
	// checked: every read checks the whole record against opened.crc,
	// its record's CRC (readcheck.go); false with WithoutReadChecks.
	// opened is the entry as opened, which a failed check removes.
	checked bool
	opened  entry
}

// Size returns the blob's size in bytes.
func (b *packedBlob) Size() int64 { return b.size }

// Stored returns Uncompressed: packed blobs are kept plain.
func (b *packedBlob) Stored() cas.Encoding { return cas.Uncompressed }

// ReadChunks reads [off, end) with pread, one chunk at a time into a buffer
// from pool; see cas.BlobReader. With reads checked, the whole record (at
// most --pack-max, 1 MiB) is read into one pooled buffer with one pread and
// checked against its CRC before any of it is handed on, as views of that
// buffer (no copy): a client that streams a read to disk never gets a byte
// it would have to know to discard.
func (b *packedBlob) ReadChunks(_ context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if !b.checked || off >= end {
		return cas.ReadChunks(b, off, end, pool, chunkSize, fn)
	}
	buf := membuf.AllocUncleared(pool, int(b.size)) // filled whole by the read before it is looked at
	if err := b.readChecked(buf.Bytes()); err != nil {
		buf.Free()
		return err
	}
	return cas.SendViews(buf, off, end, chunkSize, fn)
}

// check compares crc, the sum of the whole record as read, with the one
// its header holds, and fails the read if they differ.
func (b *packedBlob) check(crc uint32) error {
	if crc != b.opened.crc {
		return b.s.readFailed(b.opened, "record data does not match its CRC-32C")
	}
	return nil
}

// readChecked reads the whole record into p, len(p) == b.size, and checks
// it against the record's CRC.
func (b *packedBlob) readChecked(p []byte) error {
	if _, err := b.seg.ReadAt(p, b.off); err != nil {
		return fmt.Errorf("disk: reading a packed blob: %w", err)
	}
	return b.check(packfile.Checksum(p))
}

// ReadZstd compresses the blob from off as it reads it.
func (b *packedBlob) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return zstdfile.CompressChunks(ctx, b.s.zp, b, off, pool, chunkSize, fn)
}

// ReadAt reads the blob's bytes, never past its end: with reads checked,
// the whole record, into p if p takes it all, through a pooled buffer if
// not.
func (b *packedBlob) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.size {
		return 0, io.EOF
	}
	short := int64(len(p)) > b.size-off
	if short {
		p = p[:b.size-off]
	}
	var n int
	var err error
	switch {
	case !b.checked:
		n, err = b.seg.ReadAt(p, b.off+off)
	case off == 0 && int64(len(p)) == b.size:
		if err = b.readChecked(p); err == nil {
			n = len(p)
		}
	default:
		bp := hashBuffers.Get() // a record is at most 1 MiB, the buffer's size
		if err = b.readChecked((*bp)[:b.size]); err == nil {
			n = copy(p, (*bp)[off:b.size])
		}
		hashBuffers.Put(bp)
	}
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// Close lets the segment's file go.
func (b *packedBlob) Close() error {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.segments.ReleaseLocked(b.seg)
	return nil
}

// openPacked opens the packed entry of which e is a copy, checking a CAS
// blob against its name first unless this process already has. It
// returns errReplaced if the entry was replaced or evicted meanwhile.
func (s *Store) openPacked(ctx context.Context, e entry) (*packedBlob, error) {
	if e.key.kind == kindCAS {
		if err := s.checkPacked(ctx, e, false, nil); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.isCurrentLocked(e) {
		return nil, errReplaced
	}
	s.segments.HoldLocked(e.seg) // current: not evicted
	return &packedBlob{s: s, seg: e.seg, off: e.off, size: e.size, checked: !s.noReadChecks, opened: e}, nil
}

// packWriter writes one blob into a slot of the active segment, taken
// when it starts (the digest gives its size): its bytes go to the
// segment's file at their offset as they arrive, hashed and summed, and
// its committed header, then the group commit's fsync of the segment, make
// it a record. A slot abandoned by its writer stays a reserved record that
// scans step over, until its segment is evicted.
type packWriter struct {
	s   *Store
	d   cas.Digest
	seg *packs.Segment
	off int64 // of the data in the segment
	h   hash.Hash
	crc uint32
	n   int64
	end bool
}

// newPackWriter takes a slot for blob d.
func (s *Store) newPackWriter(d cas.Digest) (*packWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, cas.ErrClosed
	}
	seg, off, err := s.takeSlotLocked(entryKey{kindCAS, d.Hash}, d.Size)
	if err != nil {
		return nil, err
	}
	s.evictLocked(nil)
	return &packWriter{s: s, d: d, seg: seg, off: off, h: sha256.New()}, nil
}

// Digest returns the digest the writer was started with.
func (w *packWriter) Digest() cas.Digest { return w.d }

// Written returns the number of bytes written so far.
func (w *packWriter) Written() int64 { return w.n }

// Write appends p; past the digest's size it fails with ErrMismatch and
// writes nothing.
func (w *packWriter) Write(p []byte) (int, error) {
	n, err := w.WriteBuffers([][]byte{p})
	return int(n), err
}

// WriteBuffers appends bufs with one pwritev.
func (w *packWriter) WriteBuffers(bufs [][]byte) (int64, error) {
	if w.end {
		return 0, errors.New("disk: write after Commit or Abort")
	}
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	if total > w.d.Size-w.n {
		return 0, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	n, err := w.seg.WriteAt(bufs, w.off+w.n)
	for rest := n; rest > 0; bufs = bufs[1:] { // hash and sum what was written
		k := min(rest, len(bufs[0]))
		w.h.Write(bufs[0][:k])
		w.crc = packfile.UpdateChecksum(w.crc, bufs[0][:k])
		rest -= k
	}
	w.n += int64(n)
	return int64(n), err
}

// Suspend does nothing: the writer holds no descriptor of its own.
func (w *packWriter) Suspend() error { return nil }

// Commit checks the content against the digest, writes the committed
// header and waits for the group commit to make the record durable.
func (w *packWriter) Commit(context.Context) error {
	if w.end {
		return errors.New("disk: Commit after Commit or Abort")
	}
	if w.n != w.d.Size {
		w.Abort()
		return fmt.Errorf("%w: received %d bytes, the digest says %d", cas.ErrMismatch, w.n, w.d.Size)
	}
	var sum [sha256.Size]byte
	if got := w.h.Sum(sum[:0]); hex.EncodeToString(got) != w.d.Hash {
		w.Abort()
		return fmt.Errorf("%w: content hashes to %x, the digest says %s", cas.ErrMismatch, got, w.d.Hash)
	}
	w.end = true
	return w.s.commitRecord(w.seg, w.off, entryKey{kindCAS, w.d.Hash}, w.n, w.crc)
}

// Abort gives the slot up.
func (w *packWriter) Abort() {
	if w.end {
		return
	}
	w.end = true
	w.s.mu.Lock()
	w.s.segments.ReleaseSlotLocked(w.seg)
	w.s.mu.Unlock()
}

// writeRecord writes data, complete and checked, as a committed record of
// k into a new slot, and returns it ready for the group commit.
func (s *Store) writeRecord(k entryKey, data net.Buffers) (*pendingCommit, error) {
	var size int64
	var crc uint32
	for _, p := range data {
		size += int64(len(p))
		crc = packfile.UpdateChecksum(crc, p)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, cas.ErrClosed
	}
	seg, off, err := s.takeSlotLocked(k, size)
	if err == nil {
		s.evictLocked(nil)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// The committed header and the data in one pwritev.
	c := newRecordCommit(seg, off, k, size, crc)
	if err := seg.WriteRecord(uint8(k.kind), k.hash, data, crc, off); err != nil {
		s.mu.Lock()
		s.segments.ReleaseSlotLocked(seg)
		s.mu.Unlock()
		return nil, fmt.Errorf("disk: writing a record: %w", err)
	}
	return c, nil
}

// commitRecord writes the committed header of the record of k at off in
// seg (its data written, and checked on its way in) and makes the record
// durable and indexed through the group commit.
func (s *Store) commitRecord(seg *packs.Segment, off int64, k entryKey, size int64, crc uint32) error {
	c := newRecordCommit(seg, off, k, size, crc)
	if err := seg.WriteHeader(uint8(k.kind), k.hash, packfile.Committed, size, crc, off); err != nil {
		c.err = fmt.Errorf("disk: committing a record: %w", err)
	}
	s.committer.commit(c)
	return c.err
}

// newRecordCommit returns the commit of the record of k at off in seg,
// whose content was checked on its way in.
func newRecordCommit(seg *packs.Segment, off int64, k entryKey, size int64, crc uint32) *pendingCommit {
	return &pendingCommit{seg: seg, e: &entry{key: k, size: size, stored: size, seg: seg, off: off, verified: k.kind == kindCAS, crc: crc}}
}

// checkPacked makes sure the content of the packed CAS blob opened (a copy
// of its index entry) matches its name, hashing it unless this process
// already has (force: hash anyway, the scrubber). pace is as for
// checkBlob. A blob that does not match is removed.
func (s *Store) checkPacked(ctx context.Context, opened entry, force bool, pace func(int) error) error {
	s.mu.Lock()
	el, ok := s.packedLocked(opened.key)
	if !ok || el.seg != opened.seg || el.off != opened.off {
		s.mu.Unlock()
		return errReplaced
	}
	if el.verified && !force {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	bp := hashBuffers.Get()
	defer hashBuffers.Put(bp)
	buf := (*bp)[:opened.size]
	if err := s.readRecord(opened, buf); errors.Is(err, errReplaced) {
		return err
	} else if err != nil {
		return fmt.Errorf("disk: re-hashing a packed blob: %w", err)
	}
	if pace != nil {
		if err := pace(len(buf)); err != nil {
			return err
		}
	}
	sum := sha256.Sum256(buf)
	s.mu.Lock()
	s.verified += opened.size
	el, ok = s.packedLocked(opened.key)
	if !ok || el.seg != opened.seg || el.off != opened.off {
		s.mu.Unlock()
		return errReplaced
	}
	if hex.EncodeToString(sum[:]) != opened.key.hash {
		s.dropLocked(&el)
		s.corrupt++
		s.mu.Unlock()
		s.log.Error("packed blob failed its integrity check: removed", "hash", opened.key.hash, "size", opened.size, "segment", opened.seg.Seq, "content_hash", hex.EncodeToString(sum[:]))
		s.retireRecord(opened)
		return errCorrupt
	}
	h, _ := hashBytes(opened.key.hash)
	s.packed.SetVerified(&h, opened.key.kind == kindAC)
	s.mu.Unlock()
	return nil
}

// retireRecord makes the verdict on a packed record found bad last: it
// rewrites the record's header as a reserved slot's, which a scan steps
// over whole (package packfile), and fdatasyncs it, so that the next start
// does not index the record again. e is a copy of the entry as it was
// dropped from the index. A crash before the rewritten header is durable
// leaves the record to be indexed again at the next start, and found bad
// again by its first read (docs/cas.md, "Integrity").
func (s *Store) retireRecord(e entry) {
	s.mu.Lock()
	if !s.segments.HoldLocked(e.seg) { // keeps the file this segment's while the header is written
		s.mu.Unlock()
		return // the record went with its segment; the file may be another's now
	}
	s.mu.Unlock()
	err := e.seg.WriteHeader(uint8(e.key.kind), e.key.hash, packfile.Reserved, e.size, 0, e.off)
	if err == nil {
		err = e.seg.Sync()
	}
	s.mu.Lock()
	s.segments.ReleaseLocked(e.seg)
	s.mu.Unlock()
	if err != nil {
		s.log.Error("retiring a packed record found bad (the next start indexes it again, and its first read finds it bad again)", "hash", e.key.hash, "segment", e.seg.Seq, "err", err)
	}
}

// Hot packed entries are copied forward out of old segments (bb-storage's
// "refresh"): a lookup of an entry in the oldest quarter of the segments
// queues it, and a goroutine of the store's copies it into the active
// segment, so that eviction, which drops the oldest segment whole, takes
// what was not used lately and keeps what was.
const refreshQueue = 256

// refresh is a packed entry to copy forward: a copy of it when queued, so
// that an entry replaced meanwhile (an action result updated) is not
// overwritten with its older content.
type refresh struct {
	e entry
}

// refreshIfOldLocked queues packed entry e (a copy) for copying forward if
// its segment is among the oldest quarter. A full queue drops it: a lookup
// is never held up for a copy.
func (s *Store) refreshIfOldLocked(e entry) {
	segs := s.segments.SegmentsLocked()
	if s.refreshes == nil || len(segs) < 4 || !e.seg.Sealed || e.seg.Seq >= segs[0].Seq+uint64(len(segs)/4) {
		return
	}
	select {
	case s.refreshes <- refresh{e}:
	default:
	}
}

func (s *Store) refreshLoop(q <-chan refresh) {
	for r := range q {
		if err := s.copyForward(r); err != nil && !errors.Is(err, cas.ErrClosed) {
			s.log.Warn("copying a packed entry out of an old segment", "err", err)
		}
	}
}

// copyForward copies the packed entry of r into the active segment,
// unless it was replaced, removed or evicted meanwhile. A CAS blob is
// checked against its name on the way: rot is not copied.
func (s *Store) copyForward(r refresh) error {
	s.mu.Lock()
	old := r.e
	if !s.isCurrentLocked(old) {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	// writeRecord is done with data when it returns: a pooled buffer does.
	bp := hashBuffers.Get()
	defer hashBuffers.Put(bp)
	data := (*bp)[:old.size]
	if err := s.readRecord(old, data); errors.Is(err, errReplaced) {
		return nil // evicted meanwhile: nothing to copy
	} else if err != nil {
		return err
	}
	if old.key.kind == kindCAS {
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != old.key.hash {
			// The next read re-hashes it (unless verified) and removes it.
			return nil
		}
	}
	c, err := s.writeRecord(old.key, net.Buffers{data})
	if err != nil {
		return err
	}
	c.ifCurrent = &old
	s.committer.commit(c)
	return c.err
}

// readRecord reads the data of packed entry e (a copy of its index entry)
// into buf, e.size bytes, holding its segment's file meanwhile: an eviction
// cannot close it or hand it to a later segment under the read.
// A segment evicted since e was copied is errReplaced: its file may be
// another segment's by now.
func (s *Store) readRecord(e entry, buf []byte) error {
	s.mu.Lock()
	if !s.segments.HoldLocked(e.seg) {
		s.mu.Unlock()
		return errReplaced
	}
	s.mu.Unlock()
	_, err := e.seg.ReadAt(buf, e.off)
	s.mu.Lock()
	s.segments.ReleaseLocked(e.seg)
	s.mu.Unlock()
	return err
}
