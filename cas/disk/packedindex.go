package disk

import (
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packs"
)

// sweepPerPut is how many slots of the table each put of a record sweeps
// (packindex.Table.sweep): a full pass over a table of S slots every S/8
// puts, so the records of evicted segments never make up more than about
// a fifth of the table.
const sweepPerPut = 8

// sweepLocked sweeps n slots of the table for records of evicted
// segments.
func (s *Store) sweepLocked(n int) {
	s.packed.Sweep(&s.sweep, n, s.isLiveSeq)
}

// isLiveSeqLocked reports whether segment seq is in the store; sweep's
// test, made once as the method value isLiveSeq.
func (s *Store) isLiveSeqLocked(seq uint32) bool { return s.segments.LiveLocked(seq) != nil }

// takeSlotLocked takes a slot for a record of k of size bytes in the
// active segment into sl (packs.Set.TakeSlotLocked; with fill, for a
// record whose data is at hand, TakeSlotToFillLocked) and counts the bytes
// it takes in the store's total.
func (s *Store) takeSlotLocked(sl *packs.Slot, k entryKey, size int64, fill bool) error {
	take := s.segments.TakeSlotLocked
	if fill {
		take = s.segments.TakeSlotToFillLocked
	}
	err := take(sl, uint8(k.kind), k.hash, size)
	if err == nil {
		s.bytes += packfile.RecordLen(size)
	}
	return err
}

// evictSegmentLocked drops seg: its entries leave the index (its records
// leave the table by the sweep), its bytes the store's total, its file the
// disk (readers still holding it keep reading until they close).
func (s *Store) evictSegmentLocked(seg *packs.Segment) {
	s.generation.Add(1)
	s.observeEvictionLocked(seg.Created, seg.Entries)
	s.entries -= seg.Entries
	s.acEntries -= seg.ACEntries
	s.plainBytes -= seg.PlainBytes
	s.evictions += seg.Entries
	seg.Entries, seg.ACEntries, seg.PlainBytes = 0, 0, 0
	s.bytes -= seg.Size
	s.indexChanged = true
	s.segments.EvictLocked(seg)
}
