package packs

import (
	"fmt"
	"net"
	"sync/atomic"

	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// A Slot is a record's place in a segment, taken under the set's lock
// (TakeSlot, TakeSlotToFill) without a system call: the slot
// is reserved in memory, and its header is written outside the lock,
// by whoever gets there first:
//
//   - its writer, with its first write: the reserved header and the first
//     data in one pwritev, or the committed header and the whole record
//     when the data is at hand (a batch, a small upload in one write);
//   - any sync of the segment (Segment.Sync), which first writes a
//     reserved header into each slot taken before it that has none yet and
//     waits for the headers its writers are writing.
//
// So no sync makes a record durable while a slot before it has no header
// (package packfile: a scan after a crash steps over a slot by its header,
// and finds the records after it), and no writer's lock hold waits for a
// disk. The caller keeps the Slot (it must not be copied) until the slot
// is released (ReleaseSlot).
type Slot struct {
	Seg *Segment
	Off int64 // of the record's data in the segment

	kind uint8
	fn   uint8  // the digest function of hash, as the store numbers them
	hash string // hex
	size int64
	// state: slotPending until someone claims the header (Claim), then
	// slotClaimed until it is written (Set.Headed), then slotHeaded.
	state atomic.Int32
}

const (
	slotPending = iota
	slotClaimed
	slotHeaded
)

// Claim makes the caller the one to write the slot's header, and reports
// whether it is: false if a sync (or an earlier Claim) got there first.
// The caller that claims it writes it at once and calls Set.Headed.
func (sl *Slot) Claim() bool { return sl.state.CompareAndSwap(slotPending, slotClaimed) }

// Size is the bytes of data the slot holds.
func (sl *Slot) Size() int64 { return sl.size }

// header encodes the slot's header in state (packfile.Reserved or
// Committed, with the data's crc) into b, headerLen bytes.
func (sl *Slot) header(b []byte, hash string, state uint8, crc uint32) {
	sl.Seg.encodeHeader(b, sl.kind, sl.fn, hash, state, sl.size, crc)
}

// headerLen is the length of the slot's record's header: longer for a
// hash of more than 32 bytes (packfile.HeaderLenFor).
func (sl *Slot) headerLen() int64 { return packfile.HeaderLenFor(len(sl.hash) / 2) }

// TakeSlot takes space for a record of kind and hash (hex, of digest
// function fn) of size bytes into sl: in the active segment, making a new
// one if it has none or no space left. It writes nothing (see Slot): the
// slot's writer writes the header with its first write, or a sync writes a
// reserved one first. The slot takes packfile.RecordLen(len(hash)/2, size)
// bytes. The caller ends it with ReleaseSlot, committed or not.
func (s *Set) TakeSlot(sl *Slot, kind, fn uint8, hash string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeSlotLocked(0, sl, kind, fn, hash, size)
}

// TakeStreamSlot is TakeSlot for a streamed writer of a CAS
// blob: in the active segment of the next lane (Config.StreamLanes), so
// that concurrent writers write different files. Their records may land
// in any order across segments, which only blobs, whose records of one
// key hold the same bytes, can afford.
func (s *Set) TakeStreamSlot(sl *Slot, kind, fn uint8, hash string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lane := s.nextLane
	s.nextLane = (lane + 1) % len(s.active)
	return s.takeSlotLocked(lane, sl, kind, fn, hash, size)
}

func (s *Set) takeSlotLocked(lane int, sl *Slot, kind, fn uint8, hash string, size int64) error {
	n := packfile.RecordLen(len(hash)/2, size)
	seg := s.active[lane]
	if seg == nil || seg.Size+n > s.cfg.SegmentSize && seg.Size > 0 {
		if seg != nil {
			s.sealLocked(seg)
		}
		var err error
		if seg, err = s.newSegmentLocked(lane); err != nil {
			return err
		}
	}
	*sl = Slot{Seg: seg, Off: seg.Size + packfile.HeaderLenFor(len(hash)/2), kind: kind, fn: fn, hash: hash, size: size}
	seg.pruneHeadedLocked()
	seg.unheaded = append(seg.unheaded, sl)
	seg.Size += n
	seg.open++
	return nil
}

// TakeSlotToFill is TakeSlot for a record whose data is at
// hand: the slot is claimed (Claim) for the caller, who writes it whole
// at once (WriteFills).
func (s *Set) TakeSlotToFill(sl *Slot, kind, fn uint8, hash string, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.takeSlotLocked(0, sl, kind, fn, hash, size); err != nil {
		return err
	}
	sl.state.Store(slotClaimed)
	return nil
}

// Headed records that the header of sl, claimed by the caller, is
// written, or that writing it failed (err): then no later sync of the
// segment succeeds (a scan could not step over the slot) and the segment
// takes no more slots. It takes the lock only to wake a sync waiting for
// the header, or on error.
func (s *Set) Headed(sl *Slot, err error) {
	if err != nil {
		s.mu.Lock()
		seg := sl.Seg
		if seg.headerErr == nil {
			seg.headerErr = fmt.Errorf("disk: a record's header in pack segment %d could not be written: %w", seg.Seq, err)
		}
		sl.state.Store(slotHeaded)
		if !seg.Sealed {
			s.sealLocked(seg)
		}
		s.headed.Broadcast()
		s.mu.Unlock()
		return
	}
	sl.state.Store(slotHeaded)
	if !sl.Seg.headed.Load() { // a load, not a store, each record: the line stays shared
		sl.Seg.headed.Store(true)
	}
	// A sync counts itself a waiter before it last looks at the states,
	// so either it sees this slot headed or this sees it waiting.
	if s.waiters.Load() > 0 {
		s.mu.Lock()
		s.headed.Broadcast()
		s.mu.Unlock()
	}
}

// AwaitHeaded returns once sl's header is written, by its writer or by a
// sync: before a writer whose Claim failed writes the committed header
// over the reserved one.
func (s *Set) AwaitHeaded(sl *Slot) {
	if sl.state.Load() == slotHeaded {
		return
	}
	s.mu.Lock()
	s.waiters.Add(1)
	for sl.state.Load() != slotHeaded {
		s.headed.Wait()
	}
	s.waiters.Add(-1)
	s.mu.Unlock()
}

// HeadSlots makes sure every slot of seg that starts before end has its
// header written (to the page cache): it writes a reserved header into
// those nobody has claimed and waits for those their writers are writing.
// It returns the segment's header error, if a header could not be
// written. A sync calls it first (Segment.Sync, SyncThrough); an owner
// that acknowledges records without a sync (Config.SyncEvery) calls it,
// end past its records, before it does, so that a record is never
// acknowledged while a slot before it has no header: a process killed then
// (whose page cache survives it) leaves every slot steppable by a scan,
// even in a reused file whose old records could otherwise make a scan
// jump past the record. Slots past end are left to their writers, so
// that a writer about to write its whole blob keeps its one pwritev.
func (s *Set) HeadSlots(seg *Segment, end int64) error {
	mu := &s.mu
	mu.Lock()
	upTo := end
	if end < 0 {
		upTo = seg.Size // every slot taken so far
	}
	var mine []*Slot
	for _, sl := range seg.unheaded {
		if sl.Off >= upTo {
			break
		}
		if sl.Claim() {
			mine = append(mine, sl)
		}
	}
	mu.Unlock()
	for _, sl := range mine {
		var b [packfile.LongHeaderLen]byte
		h := b[:sl.headerLen()]
		sl.header(h, sl.hash, packfile.Reserved, 0)
		_, err := vfs.WriteAt(seg.f, h, sl.Off-int64(len(h)))
		s.Headed(sl, err)
	}
	mu.Lock()
	defer mu.Unlock()
	s.waiters.Add(1)
	for {
		seg.pruneHeadedLocked()
		if len(seg.unheaded) == 0 || seg.unheaded[0].Off >= upTo {
			break
		}
		s.headed.Wait()
	}
	s.waiters.Add(-1)
	return seg.headerErr
}

// pruneHeadedLocked drops the slots whose header is written from the
// front of the segment's list of those that have none, so that its first
// is the oldest slot still without one (slots behind it whose headers are
// written go when it does: a sync claims it soon).
func (seg *Segment) pruneHeadedLocked() {
	u := seg.unheaded
	i := 0
	for i < len(u) && u[i].state.Load() == slotHeaded {
		i++
	}
	if i > 0 {
		k := copy(u, u[i:])
		clear(u[k:])
		seg.unheaded = u[:k]
	}
}

// Fill is a record whose data is at hand, to be written whole into its
// slot (taken by TakeSlotToFill) by WriteFills.
type Fill struct {
	Slot *Slot
	Data net.Buffers
	CRC  uint32 // of Data
	Err  error  // set by WriteFills
}

// padding is what lies between a record's data and the next record's
// header (packfile.RecordLen): written as zeros when records are written
// together, so that the pwritev lands each record where its slot is.
var padding [packfile.Align]byte

// WriteFills writes each record of fills, its committed header and its
// data, into its slot: the records of consecutive slots of one segment
// (a batch's, taken in one hold of the lock) with one pwritev for all,
// and marks their headers written. Nothing orders a record's header and
// data on disk: a record torn by a crash fails its CRC check at the next
// start (Set.Load). Each Fill's Err says how its write went.
func (s *Set) WriteFills(fills []Fill) {
	var n int64
	for _, f := range fills {
		n += f.Slot.headerLen()
	}
	hdrs := make([]byte, n)
	for start := 0; start < len(fills); {
		end := start + 1
		for end < len(fills) && fills[end].Slot.Seg == fills[start].Slot.Seg &&
			fills[end].Slot.Off-fills[end].Slot.headerLen() == fills[end-1].Slot.Off-fills[end-1].Slot.headerLen()+packfile.RecordLen(len(fills[end-1].Slot.hash)/2, fills[end-1].Slot.size) {
			end++
		}
		hdrs = s.writeRun(fills[start:end], hdrs)
		start = end
	}
}

// writeRun writes fills, records of consecutive slots of one segment, with
// one pwritev (more only past IOV_MAX buffers), their headers encoded into
// the front of hdrs; it returns what of hdrs they left.
func (s *Set) writeRun(fills []Fill, hdrs []byte) []byte {
	iov := make(net.Buffers, 0, 3*len(fills))
	for i := range fills {
		f := &fills[i]
		hl := f.Slot.headerLen()
		h := hdrs[:hl:hl]
		hdrs = hdrs[hl:]
		f.Slot.header(h, f.Slot.hash, packfile.Committed, f.CRC)
		iov = append(iov, h)
		iov = append(iov, f.Data...)
		if i < len(fills)-1 {
			if pad := packfile.RecordLen(len(f.Slot.hash)/2, f.Slot.size) - hl - f.Slot.size; pad > 0 {
				iov = append(iov, padding[:pad])
			}
		}
	}
	first := fills[0].Slot
	start := first.Off - first.headerLen()
	n, err := vfs.WriteBuffersAt(first.Seg.f, iov, start)
	for i := range fills {
		f := &fills[i]
		if err != nil {
			f.Err = fmt.Errorf("disk: writing a record: %w", err)
		}
		var headerErr error
		if f.Slot.Off-start > int64(n) { // its header was not (wholly) written
			headerErr = err
		}
		s.Headed(f.Slot, headerErr)
	}
	return hdrs
}
