package membuf

import (
	"sync/atomic"
	"weak"
)

// gcEpoch counts garbage collections, lazily: it holds only a weak pointer
// to a marker object, so the first collection to complete after the marker
// was made frees it, and the next load that finds it gone moves to the next
// epoch with a new marker. An epoch later than one load returned therefore
// means at least one collection completed in between, which is all the pool
// asks of it (it does not count every collection). No finalizer, goroutine
// or runtime hook: a load is one weak-pointer lookup, and the pool calls it
// on its slow paths only.
type gcEpoch struct {
	cur atomic.Pointer[epochMark]
}

// epochMark is one epoch: its number and the weak pointer whose target the
// next collection frees. They change together, in one atomic swap.
type epochMark struct {
	n    uint64
	weak weak.Pointer[gcMark]
}

// gcMark has a pointer field so that it is not tiny-allocated: a tiny object
// shares its 16-byte block with others and is freed only with all of them.
type gcMark struct{ _ *byte }

func newEpochMark(n uint64) *epochMark {
	return &epochMark{n: n, weak: weak.Make(&gcMark{})}
}

func (g *gcEpoch) init() { g.cur.Store(newEpochMark(0)) }

// load returns the current epoch.
func (g *gcEpoch) load() uint64 {
	m := g.cur.Load()
	if m.weak.Value() != nil {
		return m.n
	}
	if next := newEpochMark(m.n + 1); g.cur.CompareAndSwap(m, next) {
		return next.n
	}
	return g.cur.Load().n // another load moved on first
}
