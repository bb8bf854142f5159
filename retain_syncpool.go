package membuf

import (
	"sync/atomic"

	"github.com/membuf/membuf/internal/syncpool"
)

// syncClass is one class of a RetainSyncPool pool: a sync.Pool of *[]byte
// (a pointer, so Put does not allocate) and counters. The counters are
// atomic because sync.Pool takes no lock they could be counted under; they
// see gets, misses and puts, but not what the garbage collector takes from
// the pool, so retained buffers and bytes are unknown.
type syncClass struct {
	pool                      syncpool.Pool[*[]byte]
	gets, misses, puts, drops atomic.Uint64
	_                         [32]byte // counters of neighbouring classes on other cache lines
}

// miss counts a get that cannot be served (an oversize request, which a
// sync.Pool mode pool never keeps) without asking the sync.Pool: an empty
// sync.Pool's Get scans every P's queue and the victim cache.
func (sc *syncClass) miss() {
	sc.gets.Add(1)
	sc.misses.Add(1)
}

func (sc *syncClass) get() *[]byte {
	sc.gets.Add(1)
	b := sc.pool.Get()
	if b == nil {
		sc.misses.Add(1)
	}
	return b
}

// put keeps b unless keep is false (oversize buffers, which a sync.Pool
// mode pool never keeps).
func (sc *syncClass) put(b *[]byte, keep bool) {
	sc.puts.Add(1)
	if !keep {
		sc.drops.Add(1)
		return
	}
	sc.pool.Put(b)
}
