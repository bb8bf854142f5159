package membuf

import "sync"

// A shard is one lock's worth of a RetainBudget pool: a LIFO free list per
// class (and one for oversize buffers), the counters of what happened under
// that lock, and a share of the budget. Counters are plain integers updated
// under the lock the operation takes anyway, so statistics cost nothing.
type shard struct {
	mu       sync.Mutex
	retained int64 // bytes, by capacity, in all lists; never above limit
	limit    int64
	lists    []freeList // one per class; the last holds oversize buffers
	_        [64]byte   // keeps the next allocation's hot fields off our cache line
}

type freeList struct {
	free []*[]byte // a stack: the top is the most recently Put
	// low is the smallest len(free) since the last idle tick: the bottom
	// low buffers were not taken for a whole interval.
	low int
	ClassStats
}

// take pops a buffer for a Get of length bytes from list idx; for the
// oversize list it takes the smallest buffer that holds length. It counts
// the get if it found one, or if last (the miss).
func (s *shard) take(idx, length int, last bool) *[]byte {
	fl := &s.lists[idx]
	n := len(fl.free)
	if n == 0 {
		if last {
			fl.Gets++
			fl.Misses++
		}
		return nil
	}
	i := n - 1
	if idx == len(s.lists)-1 {
		i = fl.bestFit(length)
		if i < 0 {
			if last {
				fl.Gets++
				fl.Misses++
			}
			return nil
		}
	}
	b := fl.free[i]
	copy(fl.free[i:], fl.free[i+1:])
	fl.free[n-1] = nil
	fl.free = fl.free[:n-1]
	if i < fl.low {
		fl.low--
	}
	c := int64(cap(*b))
	s.retained -= c
	fl.RetainedBuffers--
	fl.RetainedBytes -= c
	fl.Gets++
	fl.Hits++
	return b
}

// put keeps b in list idx if allowed and the shard's budget has room. It
// counts the put if kept, or if last (with its drop).
func (s *shard) put(idx int, b *[]byte, allowed, last bool) bool {
	fl := &s.lists[idx]
	c := int64(cap(*b))
	if !allowed || s.retained+c > s.limit || (idx == len(s.lists)-1 && len(fl.free) >= oversizeSlots) {
		if last {
			fl.Puts++
			fl.Drops++
		}
		return false
	}
	fl.free = append(fl.free, b)
	s.retained += c
	fl.RetainedBuffers++
	fl.RetainedBytes += c
	fl.Puts++
	return true
}

// release drops the bottom n buffers of list idx (the longest unused).
func (s *shard) release(idx, n int, dbg *poolDebug) {
	fl := &s.lists[idx]
	if n <= 0 {
		return
	}
	for _, b := range fl.free[:n] {
		c := int64(cap(*b))
		s.retained -= c
		fl.RetainedBytes -= c
		if dbg != nil {
			dbg.forget(b)
		}
	}
	fl.RetainedBuffers -= int64(n)
	fl.Released += uint64(n)
	m := copy(fl.free, fl.free[n:])
	clear(fl.free[m:])
	fl.free = fl.free[:m]
	fl.low = min(fl.low, m)
}

// bestFit returns the index of the smallest buffer in fl that holds length,
// or -1 if none does. Only the oversize list needs it: every buffer of a
// class list holds any length of its class.
func (fl *freeList) bestFit(length int) int {
	i := -1
	for j, b := range fl.free {
		if c := cap(*b); c >= length && (i < 0 || c < cap(*fl.free[i])) {
			i = j
		}
	}
	return i
}
