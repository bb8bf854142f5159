package packs

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// Segment is one pack file (package packfile). Records are appended to the
// active segment only; when it has no space left for a record it is sealed and a
// new one made active. A sealed segment becomes durable as a whole (fsynced
// and renamed from .open to .pack) once the last writer with a slot in it
// has finished; eviction drops the oldest sealed segment whole.
//
// Seq and the file are fixed when it is made; every other field is guarded
// by the Set's lock but the owner's (Created and the counts), which its
// owner's lock guards; Size changes only in TakeSlot, which the owner
// calls holding its own lock, so the owner may read it holding either.
// Its file is read and written only while held: by a slot taken in it
// (TakeSlot, until ReleaseSlot), by an open Blob, or by Hold.
type Segment struct {
	Seq  uint64 // its number: segments are made, and evicted, in order
	f    vfs.File
	name string // the file's path now (.open, then .pack)

	Size    int64  // bytes taken by slots: where the next one starts
	Sealed  bool   // takes no more slots
	Created uint64 // the owner's clock when it was made, set by the owner as it takes the first slot (0 until then): its age against the owner's other entries
	// Finished: fsynced whole and named .pack, so that a start may take
	// its records on trust (from an index checkpoint).
	Finished bool
	Evicted  bool // out of the set: its file is reused or removed once no one holds it
	// FromCheckpoint: loaded at start without a scan, its records to come
	// from the owner's index checkpoint.
	FromCheckpoint bool

	// The owner's counts of its index entries that are records here, so
	// that they leave with the segment when it is evicted; the set never
	// reads them.
	Entries, ACEntries, PlainBytes int64

	open    int  // slots taken whose writers have neither committed nor aborted
	durable bool // being made, or made, durable: a scan at start trusts it
	// readers hold the file (open readers, a sync or a copy under way):
	// an evicted segment's file is reused (or closed) only when none is left.
	readers int
	closed  bool // the set is closed: the last reader closes the file
	gone    bool // its file was handed on (a spare) or closed: nothing of this segment may touch it

	// set is the set that made it to take slots; nil for a segment loaded
	// at start, which takes none.
	set *Set
	// unheaded are the slots taken whose header may not be written yet,
	// oldest first (see Slot); headerErr, once one could not be.
	unheaded  []*Slot
	headerErr error
	// headed: some slot's header was written (Set.Headed), so the file may
	// hold a record; one that never had any is dropped, not kept, when its
	// last writer gives up (a full disk: see Set.finishIfDoneLocked). An
	// atomic, set outside the lock by the writer whose header it was.
	headed atomic.Bool
	// discarded: dropped holding no record; its file is removed, never
	// kept as a spare (it has no blocks to reuse).
	discarded bool
}

// ReadAt reads the segment's file at off; the caller holds the segment.
func (seg *Segment) ReadAt(p []byte, off int64) (int, error) { return seg.f.ReadAt(p, off) }

// WriteAt writes bufs at off with one pwritev, into the slot the caller
// took (TakeSlot), and returns how many bytes it wrote.
func (seg *Segment) WriteAt(bufs [][]byte, off int64) (int, error) {
	return vfs.WriteBuffersAt(seg.f, bufs, off)
}

// Sync makes what was written to the segment durable (fdatasync); the
// caller holds the segment and not the set's lock. First every slot taken
// so far gets its header written (see Slot), so that the sync makes no
// record durable while a slot before it has no header; if one could not
// be written, Sync fails without syncing.
func (seg *Segment) Sync() error { return seg.SyncThrough(-1) }

// SyncThrough is Sync for a caller that needs the records before end
// durable, and acknowledged: only the slots before end must have their
// headers first (HeadSlots); -1 is every slot taken so far.
func (seg *Segment) SyncThrough(end int64) error {
	if seg.set != nil {
		if err := seg.set.HeadSlots(seg, end); err != nil {
			return err
		}
	}
	return seg.f.Datasync()
}

// ModTime is when the segment's file was last written (for ordering it
// among other entries at start); the zero time if that cannot be known.
func (seg *Segment) ModTime() time.Time {
	fi, err := seg.f.Stat()
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// CheckCommitted reads the header of the record whose data starts at
// dataOff and returns the size of the segment's file, or an error unless
// the header is a committed record of this segment of kind, digest
// function fn, hash (raw), size
// and data CRC (maxSize bounds a header's size): what an index checkpoint
// says is there, checked once per segment at start, so that a checkpoint
// of another store, or of an earlier life of these files, is refused; the
// caller checks that each of its records lies within the file's size.
// The caller holds the segment.
func (seg *Segment) CheckCommitted(kind, fn uint8, hash []byte, size int64, crc uint32, dataOff, maxSize int64) (int64, error) {
	fi, err := seg.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("pack segment %d: %w", seg.Seq, err)
	}
	var b [packfile.LongHeaderLen]byte
	hl := packfile.HeaderLenFor(len(hash))
	off := dataOff - hl
	if _, err := seg.f.ReadAt(b[:hl], off); err != nil {
		return 0, fmt.Errorf("the record at %d of pack segment %d: %w", off, seg.Seq, err)
	}
	h, ok := packfile.DecodeHeader(b[:hl], maxSize)
	if !ok || h.State != packfile.Committed || h.Seq != seg.Seq || h.Kind != kind || h.Fn != fn || !bytes.Equal(h.Hash[:h.HashLen], hash) || h.Size != size || h.DataCRC != crc {
		return 0, fmt.Errorf("pack segment %d holds no such record at %d", seg.Seq, off)
	}
	return fi.Size(), nil
}

// WriteHeader writes the header of a record of kind and hash (hex, of
// digest function fn) whose
// data starts at dataOff: state (packfile.Reserved or Committed), its size
// and, committed, its data's CRC. The caller holds the slot or the
// segment.
func (seg *Segment) WriteHeader(kind, fn uint8, hash string, state uint8, size int64, crc uint32, dataOff int64) error {
	var b [packfile.LongHeaderLen]byte
	h := b[:packfile.HeaderLenFor(len(hash)/2)]
	seg.encodeHeader(h, kind, fn, hash, state, size, crc)
	_, err := vfs.WriteAt(seg.f, h, dataOff-int64(len(h)))
	return err
}

func (seg *Segment) encodeHeader(b []byte, kind, fn uint8, hash string, state uint8, size int64, crc uint32) {
	h := packfile.Header{Kind: kind, State: state, Fn: fn, Size: size, DataCRC: crc, Seq: seg.Seq}
	h.SetHash(hash)
	h.Encode(b)
}

// Path is the path of seg's file now: .open until it is finished, .pack
// after.
func (s *Set) Path(seg *Segment) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seg.name
}
