package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
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
	MaxPackMax = integrity.HashChunk
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
		FS: s.fs, Dir: filepath.Join(s.dir, packDirName), Log: s.log, Mu: &s.mu,
		SegmentSize: s.segSize, MaxRecord: s.packMax,
		Tick: func() uint64 { s.tick++; return s.tick },
		Zstd: s.zp,
	}
	if s.packMax > 0 {
		s.refreshes = make(chan refresh, refreshQueue)
		go s.refreshLoop(s.refreshes)
		cfg.SyncEvery = s.syncEvery
		cfg.SyncByHand = s.syncByHand
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

// openPacked opens the packed entry of which e is a copy, checking a CAS
// blob against its name first unless this process already has. It
// returns errReplaced if the entry was replaced or evicted meanwhile.
func (s *Store) openPacked(ctx context.Context, e entry) (*packs.Blob, error) {
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
	var fail func(string) error
	if !s.noReadChecks {
		fail = func(detail string) error { return s.readFailed(e, detail) }
	}
	return s.segments.OpenLocked(e.seg, e.off, e.size, e.crc, fail), nil
}

// newPackWriter takes a slot for blob d.
func (s *Store) newPackWriter(d cas.Digest) (*packs.Writer, error) {
	w := s.segments.NewWriter(d, func(sl *packs.Slot, d cas.Digest, crc uint32) error {
		c := newRecordCommit(sl.Seg, sl.Off, entryKey{kindCAS, d.Hash}, d.Size, crc)
		s.committer.commit(c)
		return c.err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, cas.ErrClosed
	}
	if err := s.takeSlotLocked(w.Slot(), entryKey{kindCAS, d.Hash}, d.Size, false); err != nil {
		return nil, err
	}
	s.evictLocked(nil)
	return w, nil
}

// writeRecord writes data, complete and checked, as a committed record of
// k into a new slot, and returns it ready for the group commit.
func (s *Store) writeRecord(k entryKey, data net.Buffers) (*pendingCommit, error) {
	var cs [1]*pendingCommit // on the stack: Put's path allocates no slices
	var errs [1]error
	s.writeRecords([]entryKey{k}, []net.Buffers{data}, cs[:], errs[:])
	return cs[0], errs[0]
}

// writeRecords writes each data[i], complete and checked, as a committed
// record of ks[i], and sets cs[i] to it ready for the group commit, or
// errs[i] to why not. Their slots are taken in one hold of the lock, so
// that they are consecutive, and written with one pwritev
// (packs.Set.WriteFills): a batch's records cost one system call, not two
// each, and none under the lock.
func (s *Store) writeRecords(ks []entryKey, data []net.Buffers, cs []*pendingCommit, errs []error) {
	fills := make([]packs.Fill, 0, len(ks))
	for i, k := range ks {
		var size int64
		var crc uint32
		for _, p := range data[i] {
			size += int64(len(p))
			crc = packfile.UpdateChecksum(crc, p)
		}
		cs[i] = &pendingCommit{e: &entry{key: k, size: size, stored: size, verified: k.kind == kindCAS, crc: crc}}
		fills = append(fills, packs.Fill{Slot: &cs[i].slot, Data: data[i], CRC: crc})
	}
	s.mu.Lock()
	taken := fills[:0]
	for i, f := range fills {
		err := cas.ErrClosed
		if !s.closed {
			err = s.takeSlotLocked(f.Slot, ks[i], cs[i].e.size, true)
		}
		if err != nil {
			errs[i], cs[i] = err, nil
			continue
		}
		cs[i].seg, cs[i].e.seg, cs[i].e.off = f.Slot.Seg, f.Slot.Seg, f.Slot.Off
		taken = append(taken, f)
	}
	if len(taken) > 0 {
		s.evictLocked(nil)
	}
	s.mu.Unlock()
	s.segments.WriteFills(taken)
	for _, f := range taken {
		if f.Err == nil {
			continue
		}
		for i, c := range cs {
			if c != nil && &c.slot == f.Slot {
				errs[i], cs[i] = f.Err, nil
			}
		}
		s.mu.Lock()
		s.segments.ReleaseSlotLocked(f.Slot.Seg)
		s.mu.Unlock()
	}
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
	bp := integrity.Buffers.Get()
	defer integrity.Buffers.Put(bp)
	buf := (*bp)[:opened.size]
	err := s.readRecord(opened, buf)
	switch {
	case errors.Is(err, errReplaced):
		return err
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// Past the end of its file (truncated): lost as surely as one
		// that does not match, and retired the same way, so that it
		// reads missing and can be uploaded again.
		return s.readFailed(opened, "record lies past the end of its segment's file")
	case err != nil:
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
	h, _ := packindex.ParseHash(opened.key.hash)
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
	if err := s.segments.Retire(e.seg, uint8(e.key.kind), e.key.hash, e.size, e.off); err != nil {
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
	bp := integrity.Buffers.Get()
	defer integrity.Buffers.Put(bp)
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
	ok, err := s.segments.Hold(e.seg, func() error {
		_, err := e.seg.ReadAt(buf, e.off)
		return err
	})
	if !ok {
		return errReplaced
	}
	return err
}
