package disk

import (
	"cmp"
	"slices"
)

// sweepPerPut is how many slots of the table each put of a record sweeps
// (packindex.Table.sweep): a full pass over a table of S slots every S/8
// puts, so the records of evicted segments never make up more than about
// a fifth of the table.
const sweepPerPut = 8

// liveSegmentLocked returns the segment numbered seq, or nil if it was
// evicted (or never existed: a record loaded from an index checkpoint
// whose segment went since).
func (s *Store) liveSegmentLocked(seq uint32) *segment {
	i, ok := slices.BinarySearchFunc(s.segments, uint64(seq), func(seg *segment, seq uint64) int { return cmp.Compare(seg.seq, seq) })
	if !ok || s.segments[i].evicted {
		return nil
	}
	return s.segments[i]
}

// sweepLocked sweeps n slots of the table for records of evicted
// segments.
func (s *Store) sweepLocked(n int) {
	s.packed.Sweep(&s.sweep, n, s.isLiveSeq)
}

// isLiveSeqLocked reports whether segment seq is in the store; sweep's
// test, made once as the method value isLiveSeq.
func (s *Store) isLiveSeqLocked(seq uint32) bool { return s.liveSegmentLocked(seq) != nil }
