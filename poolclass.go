package membuf

import (
	"sync/atomic"

	"github.com/membuf/membuf/internal/syncpool"
)

// A poolClass is one size class's lock-free part: the front, a sync.Pool
// that serves the common case at the cost of a sync.Pool, and the figures
// that decide when a Put goes to the store instead. Everything here but the
// front is written only on slow paths (a miss, a store hit, a store put),
// so the two loads on the fast path hit a cache line that stays shared.
type poolClass struct {
	// front holds buffers beyond the store's reserve, per P, without a
	// lock; like any sync.Pool it loses what it holds over two garbage
	// collections. Debug mode never uses it.
	front syncpool.Pool[*[]byte]
	// stored is how many buffers of the class the store holds, over all
	// shards (changed after each store put, take and release).
	stored atomic.Int64
	// reserve is how many the store should hold: what the class needed
	// that neither the front nor the store had (see Pool.miss). A Put goes
	// to the store while stored < reserve.
	reserve atomic.Int64
	// filled is the GC epoch of the latest store put: a store hit in the
	// same epoch served a buffer that no collection threatened, so it
	// shrinks the reserve (see Pool.takeStored).
	filled atomic.Uint64
	// 64 bytes in all (sync.Pool is 40).
}

// lower reduces the reserve by n, not below 0.
func (c *poolClass) lower(n int64) {
	for {
		r := c.reserve.Load()
		if r <= 0 || c.reserve.CompareAndSwap(r, max(r-n, 0)) {
			return
		}
	}
}
