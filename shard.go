package membuf

import "sync"

// A shard is one lock's worth of the pool's store, the part that survives
// garbage collections: a LIFO free list per class (and one for oversize
// buffers), the counts of what happened under that lock, and a share of the
// budget. The counts are plain integers updated under the lock the
// operation takes anyway.
type shard struct {
	mu       sync.Mutex
	retained int64 // bytes, by capacity, in all lists; never above limit
	limit    int64
	lists    []freeList // one per class; the last holds oversize buffers
	_        [64]byte   // keeps the next allocation's hot fields off our cache line
}

// A freeList holds one class's retained buffers in a shard. What it holds
// is len(free) buffers, puts-hits-released of them, of bytes total
// capacity.
type freeList struct {
	free []*[]byte // a stack: the top is the most recently Put
	// low is the smallest len(free) since the last idle tick: the bottom
	// low buffers were not taken for a whole interval.
	low                 int
	hits, puts, release uint64
	bytes               int64
}

// take pops a buffer for a Get of length bytes from list idx, or returns
// nil; for the oversize list it takes the smallest buffer that holds length.
func (s *shard) take(idx, length int) *[]byte {
	fl := &s.lists[idx]
	n := len(fl.free)
	if n == 0 {
		return nil
	}
	i := n - 1
	if idx == len(s.lists)-1 {
		if i = fl.bestFit(length); i < 0 {
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
	fl.bytes -= c
	fl.hits++
	return b
}

// put keeps b in list idx if the shard's budget has space (and, for the
// oversize list, a slot is free), and reports whether it did.
func (s *shard) put(idx int, b *[]byte) bool {
	fl := &s.lists[idx]
	c := int64(cap(*b))
	if s.retained+c > s.limit || (idx == len(s.lists)-1 && len(fl.free) >= oversizeSlots) {
		return false
	}
	fl.free = append(fl.free, b)
	s.retained += c
	fl.bytes += c
	fl.puts++
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
		fl.bytes -= c
		if dbg != nil {
			dbg.forget(b)
		}
	}
	fl.release += uint64(n)
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
