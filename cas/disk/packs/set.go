package packs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Config is what a Set needs of the store that owns it.
type Config struct {
	FS  vfs.FS // the file system the segments are in; nil is vfs.Default
	Dir string // the segments' directory (packs/ under the store's)
	Log *slog.Logger
	// SegmentSize is the bytes of slots a segment takes before it is
	// sealed; MaxRecord the largest record's data (what a scan accepts).
	SegmentSize, MaxRecord int64
	// StreamLanes is how many active segments take the slots of streamed
	// writers (TakeStreamSlot), in turn: concurrent writes that
	// extend one file queue on its lock in the kernel (see
	// BenchmarkConcurrentRecordWrites). 0 or 1: the one active segment
	// takes every slot.
	StreamLanes int
	// SyncEvery: 0, the owner syncs a segment before it acknowledges a
	// record (Segment.Sync); else the set's syncer syncs the segments
	// written (MarkWritten) every SyncEvery.
	SyncEvery time.Duration
	// SyncByHand: the syncer's interval never passes; a pass is made
	// by SyncPass, and at Close (a test's, to know which records a pass
	// covered).
	SyncByHand bool
	// Zstd compresses a Blob read compressed (Blob.ReadZstd).
	Zstd *zstdseek.Pool
}

// Set is the pack segments of one store, oldest first: it makes them,
// takes slots in the active one, makes each durable as a whole when its
// last writer is done, evicts them whole, reuses evicted segments' files,
// and loads them at start. Which records are current is the owner's index's
// to know; the set knows segments and slots.
type Set struct {
	cfg      Config
	segments []*Segment // oldest first
	// active are the segments taking slots, one a lane, each nil until its
	// first: lane 0's takes every slot of TakeSlot (action results,
	// batches, copies), so that of a key the later record is the newer;
	// streamed CAS writers take turns at all of them.
	//
	// mu is the set's own lock: every method takes it, and the set's
	// goroutines (finishing a segment, the syncer). It guards the set and
	// the fields of its segments but Seq (fixed) and the owner's (Created,
	// Entries, ACEntries, PlainBytes: the owner's lock guards those). The
	// owner calls the set holding its own lock; the set calls nothing of
	// the owner's, so the order is always the owner's lock, then this one.
	mu       sync.Mutex
	active   []*Segment
	nextLane int // the lane of the next streamed writer's slot
	nextSeq  uint64
	spare    []spareFile    // evicted segments' files, to be reused
	closing  bool           // Close has begun: no segment starts being made durable
	finish   sync.WaitGroup // segments being made durable in the background
	scanned  int            // segments read record by record at start
	// emptyRemoved is how many segments Load removed holding no record.
	emptyRemoved int
	unsynced     map[*Segment]bool
	syncWake     chan struct{} // the syncer's: records to sync, or Close
	syncDone     chan struct{} // closed when the syncer has made its last pass
	passMu       sync.Mutex    // held through a pass of the syncer (syncPass)
	// headed is signalled (on mu) when a slot's header is written
	// and a sync or a writer waits for one (waiters: how many); see Slot.
	headed  *sync.Cond
	waiters atomic.Int32
}

// Segment files live in Config.Dir, named by their number in hex.
const (
	openSuffix = ".open"
	doneSuffix = ".pack"
	freeSuffix = ".free" // an evicted segment's file, kept to be reused
	// maxSpareFiles is how many evicted segments' files are kept for
	// reuse: enough for the next segment while the last is in use.
	maxSpareFiles = 2
	nameLen       = 16 // hex digits of seq
)

// spareFile is an evicted segment's file, to be reused for a new segment.
type spareFile struct {
	f    vfs.File
	name string
}

// NewSet returns the set of segments in cfg.Dir, empty until Load. With
// cfg.SyncEvery it starts the syncer, which Close stops.
func NewSet(cfg Config) *Set {
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	s := &Set{cfg: cfg, active: make([]*Segment, max(cfg.StreamLanes, 1))}
	s.headed = sync.NewCond(&s.mu)
	if cfg.SyncEvery > 0 {
		s.unsynced = make(map[*Segment]bool)
		s.syncWake = make(chan struct{}, 1)
		s.syncDone = make(chan struct{})
		go s.syncLoop()
	}
	return s
}

func (s *Set) path(seq uint64, suffix string) string {
	return filepath.Join(s.cfg.Dir, fmt.Sprintf("%0*x%s", nameLen, seq, suffix))
}

// parseName parses a file name of the directory: a segment's, finished
// (durable) or not, or a spare file's (free).
func parseName(name string) (seq uint64, durable, free, ok bool) {
	base, durable := strings.CutSuffix(name, doneSuffix)
	if !durable {
		var open bool
		if base, open = strings.CutSuffix(name, openSuffix); !open {
			if base, free = strings.CutSuffix(name, freeSuffix); !free {
				return 0, false, false, false
			}
		}
	}
	if len(base) != nameLen {
		return 0, false, false, false
	}
	seq, err := strconv.ParseUint(base, 16, 64)
	return seq, durable, free, err == nil
}

// Segments returns the segments in the set now, oldest first.
func (s *Set) Segments() []*Segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.segments)
}

// SegmentSize is a segment's number and the bytes its slots take.
type SegmentSize struct {
	Seq  uint64
	Size int64
}

// Finished returns the segments finished (fsynced whole, named .pack)
// and not evicted, oldest first: those an index checkpoint taken now
// covers.
func (s *Set) Finished() []SegmentSize {
	s.mu.Lock()
	defer s.mu.Unlock()
	var segs []SegmentSize
	for _, seg := range s.segments {
		if !seg.Evicted && seg.Finished {
			segs = append(segs, SegmentSize{seg.Seq, seg.Size})
		}
	}
	return segs
}

// isOldLocked reports whether seg is sealed and among the oldest quarter
// of the set's segments (of four or more): those whose hot records are
// copied forward, before eviction takes them.
func (s *Set) isOldLocked(seg *Segment) bool {
	n := len(s.segments)
	return n >= 4 && seg.Sealed && seg.Seq < s.segments[0].Seq+uint64(n/4)
}

// Live returns the segment numbered seq, or nil if it was evicted
// (or never existed: a record loaded from an index checkpoint whose
// segment went since).
func (s *Set) Live(seq uint32) *Segment {
	seg, _ := s.LiveOld(seq)
	return seg
}

// LiveOld is Live, and whether the segment is old (sealed and among the
// oldest quarter, whose hot records are copied forward before eviction
// takes them), in one hold of the set's lock: a lookup's.
func (s *Set) LiveOld(seq uint32) (seg *Segment, old bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := slices.BinarySearchFunc(s.segments, uint64(seq), func(seg *Segment, seq uint64) int { return cmp.Compare(seg.Seq, seq) })
	if !ok || s.segments[i].Evicted {
		return nil, false
	}
	return s.segments[i], s.isOldLocked(s.segments[i])
}

// Closing reports whether Close has begun.
func (s *Set) Closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Scanned returns how many segments the start read record by record.
func (s *Set) Scanned() int { return s.scanned }

// newSegmentLocked makes a new active segment for lane, in a spare file if there
// is one (its blocks are allocated already: writing over them changes no
// metadata, so an fdatasync of them costs no journal commit). Its directory
// entry is made durable at once: a record committed into it must survive a
// crash.
func (s *Set) newSegmentLocked(lane int) (*Segment, error) {
	seq := s.nextSeq
	if seq > math.MaxUint32 {
		// The index keeps a record's segment in 32 bits: at a segment a
		// second, 136 years of them.
		return nil, errors.New("disk: pack segment numbers are used up (2^32 segments)")
	}
	name := s.path(seq, openSuffix)
	var f vfs.File
	var err error
	if n := len(s.spare); n > 0 {
		sp := s.spare[n-1]
		s.spare = s.spare[:n-1]
		if err = s.cfg.FS.Rename(sp.name, name); err == nil {
			f = sp.f
		} else {
			sp.f.Close()
			s.cfg.FS.Remove(sp.name)
		}
	}
	if f == nil {
		if f, err = s.cfg.FS.Create(name); err != nil {
			return nil, fmt.Errorf("disk: making a pack segment: %w", err)
		}
	}
	if err := s.cfg.FS.SyncDir(s.cfg.Dir); err != nil {
		f.Close()
		s.cfg.FS.Remove(name)
		return nil, fmt.Errorf("disk: making a pack segment: %w", err)
	}
	s.nextSeq++
	seg := &Segment{Seq: seq, f: f, name: name, set: s}
	s.segments = append(s.segments, seg)
	s.active[lane] = seg
	return seg, nil
}

// sealLocked stops seg taking slots, and finishes it if no writer holds
// one.
func (s *Set) sealLocked(seg *Segment) {
	seg.Sealed = true
	if i := slices.Index(s.active, seg); i >= 0 {
		s.active[i] = nil
	}
	s.finishIfDoneLocked(seg)
}

// ReleaseSlot records that a writer with a slot in seg has committed
// or aborted.
func (s *Set) ReleaseSlot(seg *Segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg.open--
	s.finishIfDoneLocked(seg)
}

// finishIfDoneLocked makes seg durable as a whole, in the background, once
// it is sealed and no writer holds a slot in it.
func (s *Set) finishIfDoneLocked(seg *Segment) {
	if !seg.Sealed || seg.open > 0 || seg.durable || seg.Evicted || s.closing {
		return
	}
	if seg.headerErr != nil && !seg.headed.Load() {
		// No header could be written (a full disk): it holds no record, and
		// kept it would hold a descriptor and an empty file for each write
		// that found the disk full.
		s.discardLocked(seg)
		return
	}
	seg.durable = true // by the time anyone else looks, or the next start will see .open and check it
	seg.readers++      // the file is this goroutine's until it is done
	s.finish.Go(func() {
		done := s.path(seg.Seq, doneSuffix)
		err := seg.Sync() // a slot its writer left without a header gets a reserved one first
		if err == nil {
			err = s.cfg.FS.Rename(seg.name, done)
		}
		if err == nil {
			err = s.cfg.FS.SyncDir(s.cfg.Dir)
		}
		if err != nil {
			s.cfg.Log.Warn("finishing a pack segment (it stays .open; the next start checks it)", "seq", seg.Seq, "err", err)
		}
		s.mu.Lock()
		if err == nil {
			seg.name, seg.Finished = done, true
		}
		s.releaseLocked(seg)
		s.mu.Unlock()
	})
}

// discardLocked drops seg, which holds no record, from the set and removes
// its file once no one holds it.
func (s *Set) discardLocked(seg *Segment) {
	seg.discarded = true
	seg.Evicted = true
	delete(s.unsynced, seg)
	s.segments = slices.DeleteFunc(s.segments, func(x *Segment) bool { return x == seg })
	seg.readers++
	s.releaseLocked(seg)
}

// OldestEvictable returns the oldest segment eviction may drop:
// sealed, with no writer holding a slot. nil if there is none.
func (s *Set) OldestEvictable() *Segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segments {
		if seg.Sealed && seg.open == 0 {
			return seg
		}
	}
	return nil
}

// Evict drops seg from the set; its file leaves the disk (or becomes
// a spare) once the last who holds it lets it go. The owner takes its
// entries out of its index and counts first.
func (s *Set) Evict(seg *Segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg.Evicted = true
	delete(s.unsynced, seg) // its records are gone: nothing to make durable
	s.segments = slices.DeleteFunc(s.segments, func(x *Segment) bool { return x == seg })
	s.cfg.Log.Debug("evicted a pack segment", "seq", seg.Seq, "bytes", seg.Size)
	seg.readers++
	s.releaseLocked(seg) // reused or removed now, or when its last reader is done
}

// holdLocked keeps seg's file open, and seg's, until releaseLocked; false
// if seg was evicted (its file may be another segment's by now).
func (s *Set) holdLocked(seg *Segment) bool {
	if seg.Evicted {
		return false
	}
	seg.readers++
	return true
}

// releaseLocked ends one hold of seg's file. The last of an evicted
// segment's makes the file a spare, to be written over by a later segment
// (its records name their segment, so none of its old ones count there),
// or removes it if there are spares enough or the set is closing.
func (s *Set) releaseLocked(seg *Segment) {
	seg.readers--
	if seg.readers > 0 || seg.gone {
		return
	}
	if !seg.Evicted && !seg.closed {
		return
	}
	seg.gone = true
	if !seg.Evicted {
		seg.f.Close()
		return
	}
	free := s.path(seg.Seq, freeSuffix)
	if len(s.spare) < maxSpareFiles && !s.closing && !seg.discarded {
		if err := s.cfg.FS.Rename(seg.name, free); err == nil {
			s.spare = append(s.spare, spareFile{seg.f, free})
			return
		}
	}
	seg.f.Close()
	if err := s.cfg.FS.Remove(seg.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.cfg.Log.Error("removing a pack segment", "seq", seg.Seq, "err", err)
	}
}

// Close makes the active segments durable if no writer holds a slot in
// them (else the next start checks them), stops the syncer after its last pass,
// waits for the segments being made durable, and closes the segments'
// files (a reader still holding one closes it when done).
func (s *Set) Close() {
	s.mu.Lock()
	for _, seg := range s.active {
		if seg != nil && seg.open == 0 {
			s.sealLocked(seg)
		}
	}
	s.closing = true // no segment starts being finished from here on
	if s.syncDone != nil {
		s.wakeSyncer()
	}
	s.mu.Unlock()
	if s.syncDone != nil {
		<-s.syncDone // its last pass makes every record durable
	}
	s.finish.Wait()
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

// Hold runs fn holding seg's file, so that no eviction closes it or hands
// it to a later segment meanwhile; ok is false, and fn not run, if seg was
// evicted already (its file may be another segment's by now).
func (s *Set) Hold(seg *Segment, fn func() error) (ok bool, err error) {
	s.mu.Lock()
	if !s.holdLocked(seg) {
		s.mu.Unlock()
		return false, nil
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.releaseLocked(seg)
		s.mu.Unlock()
	}()
	return true, fn()
}

// Records lists the committed records of seg from its headers, holding its
// file meanwhile; ok is false if seg was evicted.
func (s *Set) Records(seg *Segment) (records []packfile.Record, ok bool, err error) {
	ok, err = s.Hold(seg, func() (err error) {
		records, _, err = packfile.Scan(seg.f, false, s.cfg.MaxRecord, seg.Seq)
		return err
	})
	return records, ok, err
}

// Retire rewrites the header of seg's record of kind and hash (of digest
// function fn), size
// bytes of data at dataOff, as a reserved slot's, which a scan steps over
// whole (package packfile), and fdatasyncs it, so that the next start
// does not index a record found bad again. The segment is held meanwhile;
// one evicted already took the record with it, and a header past the end
// of a file cut short has nothing to rewrite (writing it would grow the
// file with a hole).
func (s *Set) Retire(seg *Segment, kind, fn uint8, hash string, size, dataOff int64) error {
	_, err := s.Hold(seg, func() error {
		var hb [packfile.LongHeaderLen]byte
		hl := packfile.HeaderLenFor(len(hash) / 2)
		if _, err := seg.ReadAt(hb[:hl], dataOff-hl); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err := seg.WriteHeader(kind, fn, hash, packfile.Reserved, size, 0, dataOff); err != nil {
			return err
		}
		return seg.Sync()
	})
	return err
}
