package membuf

import (
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// pageSize is what requests above MaxSize are rounded up to, as grpc-go does
// for its fallback pool, so that nearby oversize lengths share buffers.
const pageSize = 4096

// oversizeSlots is how many buffers above MaxSize each shard keeps when
// Config.RetainOversize is set.
const oversizeSlots = 4

// A Pool hands out byte slices from size classes spaced between powers of
// two and takes them back for reuse. It is safe for concurrent use. Its
// method set is grpc-go's mem.BufferPool, so a *Pool can serve as one.
//
// A buffer from Get belongs to the caller until the caller passes the same
// pointer to Put; after Put neither the pointer nor the slice may be used.
// Get+Put of a reused buffer allocates nothing.
//
// Each class has two places to keep buffers: a front, one sync.Pool per
// class, which costs what a sync.Pool costs and, like one, is emptied by
// garbage collections; and the store, sharded free lists under locks that
// survive collections and never hold more than the budget. Get tries the
// front, then the store; Put fills the store up to the class's reserve
// (what the class had to allocate because neither had a buffer) and gives
// the rest to the front. See docs/pool.md.
type Pool struct {
	classes  classTable
	clearing Clearing
	debug    bool
	oversize bool // retain buffers above MaxSize

	cls    []poolClass // one per class and one for oversize (whose front is unused)
	counts poolCounts

	// The store: shards, each with its own lock and a Budget/len(shards)
	// share of the budget. mask = len(shards)-1.
	shards []*shard
	mask   int
	budget int64

	gc        gcEpoch
	undersize atomic.Uint64 // Puts of nil or below MinSize
	dbg       *poolDebug

	// shown is, per class, the front counts the latest Stats reported,
	// so that a later one never reports less (a lost increment can take a
	// stripe's count back; see frontCounter). Guarded by statsMu.
	statsMu sync.Mutex
	shown   []frontShown
}

// frontShown is one class's front counts as Stats last reported them.
type frontShown struct{ hits, puts uint64 }

// NewPool returns a pool configured by cfg, or a *[ConfigError] naming the
// first invalid field.
func NewPool(cfg Config) (*Pool, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(0)
	p := &Pool{
		classes:  newClassTable(r.shift, r.MinSize, r.MaxSize),
		clearing: r.Clearing,
		debug:    r.Debug,
		oversize: r.RetainOversize,
		budget:   r.Budget,
	}
	if p.debug {
		p.dbg = newPoolDebug() // Put stacks, for reports of writes after free
	}
	p.cls = make([]poolClass, p.classes.n+1)
	p.shown = make([]frontShown, p.classes.n+1)
	p.counts = newPoolCounts(p.classes.n+1, procs)
	p.gc.init()
	n := shardCount(procs, r.Budget, r.MaxSize)
	p.shards = make([]*shard, n)
	p.mask = n - 1
	for i := range p.shards {
		// Each shard is its own allocation, padded at its end, so that
		// two shards' locks and counters never share a cache line.
		p.shards[i] = &shard{
			limit: r.Budget / int64(n),
			lists: make([]freeList, p.classes.n+1),
		}
	}
	if r.IdleTimeout > 0 {
		startIdleRelease(p, r.IdleTimeout)
	}
	return p, nil
}

// shardCount is the number of shards: a power of two at least procs, halved
// while a shard's share of the budget would be under two largest buffers
// (a shard that cannot hold its largest class is of little use), and at
// least 1.
func shardCount(procs int, budget int64, maxSize int) int {
	n := 1
	for n < procs {
		n <<= 1
	}
	for n > 1 && budget/int64(n) < 2*int64(maxSize) {
		n >>= 1
	}
	return n
}

var defaultPool = sync.OnceValue(func() *Pool {
	p, err := NewPool(Config{})
	if err != nil {
		panic("membuf: the default Config is invalid: " + err.Error())
	}
	return p
})

// DefaultPool returns the process-wide pool with the default [Config],
// created on first use.
func DefaultPool() *Pool { return defaultPool() }

// debugOn reports whether this pool runs in debug mode: Config.Debug was set
// or the MEMBUF_DEBUG environment variable was true at start-up. Buffers
// taken from the pool record stacks only when it is on.
func (p *Pool) debugOn() bool { return p != nil && p.debug }

// Get returns a pointer to a slice of length length from the smallest class
// that holds it; its capacity is the class size. What a reused buffer holds
// depends on the pool's [Clearing]. Above MaxSize the capacity is length
// rounded up to a multiple of 4096.
//
// Get of zero or a negative length returns a new pointer to an empty slice
// with no capacity (it allocates the pointer, does not touch the pool and
// is not counted); a Put of it is dropped as undersized. Get never panics
// except where the runtime itself cannot allocate the memory.
func (p *Pool) Get(length int) *[]byte {
	// Not a wrapper of a body shared with GetUncleared: grpc-go calls Get
	// through the BufferPool interface, where a wrapper is one more call
	// that the compiler cannot inline away (about 1 ns of a 25 ns Get+Put).
	// The two share everything but the front hit, which each spells out.
	//
	// length <= 0 wraps around to above maxSize-1: one compare for both.
	if uint(length-1) >= uint(p.classes.maxSize) {
		return p.getOutside(length, p.clearing)
	}
	c := p.classes.getIndex(length)
	b := p.cls[c].front.Get()
	if b == nil {
		return p.getStored(c, length, p.clearing)
	}
	p.counts.of(c, b).frontHits.inc()
	// Debug mode never fills the front (see putDebug), so a front hit has
	// no poison to check.
	s := (*b)[:length]
	if p.clearing != ClearNone {
		clearReused(s, p.clearing)
	}
	*b = s
	return b
}

// GetUncleared is Get without clearing, whatever the pool's [Clearing]: a
// reused buffer comes back as it is, and every byte of it may hold what a
// previous user wrote. It is for callers that overwrite (*b)[:length]
// before they read it or hand it to anyone, such as a reader filling the
// buffer from a file or a socket (and checking that it filled it): they
// need not pay for clearing memory they fill at once. Memory handed to code
// that may read before it writes must come from Get. New buffers are still
// all zeros, and debug mode still checks a reused buffer's poison.
func (p *Pool) GetUncleared(length int) *[]byte {
	// As Get (see there), without the clearing.
	if uint(length-1) >= uint(p.classes.maxSize) {
		return p.getOutside(length, ClearNone)
	}
	c := p.classes.getIndex(length)
	b := p.cls[c].front.Get()
	if b == nil {
		return p.getStored(c, length, ClearNone)
	}
	p.counts.of(c, b).frontHits.inc()
	*b = (*b)[:length]
	return b
}

// getOutside serves a Get of a length outside the classes: none (0 or
// less: a new empty slice, not counted) or above MaxSize.
func (p *Pool) getOutside(length int, clearing Clearing) *[]byte {
	if length <= 0 {
		return new([]byte)
	}
	return p.getOversize(length, clearing)
}

// getStored serves a Get of class c that the front could not: from the
// store, or a new buffer.
func (p *Pool) getStored(c, length int, clearing Clearing) *[]byte {
	b := p.takeStored(c)
	if b == nil {
		buf := make([]byte, length, p.classes.size(c))
		p.miss(c, &buf)
		return &buf
	}
	p.reuse(b, length, clearing)
	return b
}

// takeStored takes a buffer of class c from the store, for a Get the front
// could not serve. A hit in the epoch of the latest store put served a
// buffer that no collection had threatened: the class's working set
// outgrew its front, so the buffer serves as working set and the reserve
// shrinks by one (else every later Put would refill the store, and the
// class would live on the locked path). A hit in a later epoch is what the
// reserve is for.
func (p *Pool) takeStored(c int) *[]byte {
	cl := &p.cls[c]
	if cl.stored.Load() <= 0 {
		return nil
	}
	b := p.take(c, 0)
	if b != nil && p.gc.load() == cl.filled.Load() {
		cl.lower(1)
	}
	return b
}

// miss counts a Get that neither the front nor the store could serve (b is
// the new buffer), and raises the class's reserve by one, up to what the
// budget could hold: a collection that empties the front will find that
// many in the store.
func (p *Pool) miss(c int, b *[]byte) {
	p.counts.of(c, b).misses.Add(1)
	cl := &p.cls[c]
	if c < p.classes.n && cl.reserve.Load()*int64(p.classes.size(c)) < p.budget {
		cl.reserve.Add(1)
	}
}

// Put returns b for reuse. Any slice the caller owns is accepted, not only
// slices from this pool: it is filed by its capacity into the largest class
// it fills, so a buffer that was resliced (or came from elsewhere) serves
// requests of that class. Put drops, and counts, without panicking:
//   - nil, a pointer to a nil or zero-capacity slice, or a capacity below
//     MinSize (Stats.Undersize);
//   - a capacity above MaxSize, unless RetainOversize (Stats.Oversize.Drops);
//   - in debug mode, a buffer that would take the store over its budget
//     (the class's Drops).
//
// After Put the caller must not use b or the slice again.
func (p *Pool) Put(b *[]byte) {
	if b == nil {
		p.undersize.Add(1)
		return
	}
	c := cap(*b)
	// Below MinSize wraps around to above the span: one compare for both.
	if uint(c-p.classes.minSize) > uint(p.classes.maxSize-p.classes.minSize) {
		p.putOutside(b)
		return
	}
	idx := p.classes.putIndex(c)
	if p.debug {
		p.putDebug(idx, b)
		return
	}
	cl := &p.cls[idx]
	if cl.stored.Load() < cl.reserve.Load() && p.store(idx, b, nil) {
		return
	}
	p.counts.of(idx, b).frontPuts.inc()
	cl.front.Put(b)
}

// putOutside takes a Put whose capacity is below MinSize or above MaxSize.
func (p *Pool) putOutside(b *[]byte) {
	if cap(*b) < p.classes.minSize {
		p.undersize.Add(1)
		return
	}
	p.putOversize(b)
}

// putDebug poisons b and keeps it in the store with the stack of its Put, or
// drops it if the store is full. Debug mode never uses the front: the
// garbage collector empties a sync.Pool unseen, so the stacks of what it
// held could never be forgotten.
func (p *Pool) putDebug(idx int, b *[]byte) {
	if !p.store(idx, b, p.poison(b)) {
		p.counts.of(idx, b).drops.Add(1)
	}
}

func (p *Pool) putOversize(b *[]byte) {
	idx := p.classes.n
	switch {
	case !p.oversize:
		p.counts.of(idx, b).drops.Add(1)
	case p.debug:
		p.putDebug(idx, b)
	case !p.store(idx, b, nil):
		p.counts.of(idx, b).drops.Add(1)
	}
}

// take pops a buffer of list idx from the first shard that has one (see
// shardWalk), or returns nil.
func (p *Pool) take(idx, length int) *[]byte {
	w := p.walk()
	for s := w.next(); s != nil; s = w.next() {
		b := s.take(idx, length)
		s.mu.Unlock()
		if b != nil {
			p.cls[idx].stored.Add(-1)
			return b
		}
	}
	return nil
}

// store keeps b in list idx of the first shard with space, with its Put
// stack st in debug mode, and reports whether one had space.
func (p *Pool) store(idx int, b *[]byte, st *stack) bool {
	w := p.walk()
	for s := w.next(); s != nil; s = w.next() {
		kept := s.put(idx, b)
		if kept && st != nil {
			p.dbg.record(b, st) // under the shard lock: no Get can see b before its stack is recorded
		}
		s.mu.Unlock()
		if kept {
			cl := &p.cls[idx]
			cl.stored.Add(1)
			cl.filled.Store(p.gc.load())
			return true
		}
	}
	return false
}

// shardWalk visits every shard once from a random start: first the shards
// whose lock is free (TryLock), then, waiting, the ones that were busy, so
// that a Get or Put goes around a busy shard rather than queue on it.
type shardWalk struct {
	p     *Pool
	start int
	j     int    // next position of the first pass
	busy  uint64 // bit j: the shard at position j was busy in the first pass
}

// walk starts a walk at a random shard: rand.Uint32 is the runtime's cheap
// per-thread generator, so concurrent callers spread over the shards
// without sharing a cache line.
func (p *Pool) walk() shardWalk {
	start := 0
	if p.mask != 0 {
		start = int(rand.Uint32()) & p.mask
	}
	return shardWalk{p: p, start: start}
}

// next returns the next shard, locked, or nil when every shard was visited.
func (w *shardWalk) next() *shard {
	p := w.p
	for w.j < len(p.shards) {
		j := w.j
		w.j++
		s := p.shards[(w.start+j)&p.mask]
		if !s.mu.TryLock() {
			if j < 64 { // beyond 64 shards, wait at once: busy has 64 bits
				w.busy |= 1 << j
				continue
			}
			s.mu.Lock()
		}
		return s
	}
	if w.busy == 0 {
		return nil
	}
	j := bits.TrailingZeros64(w.busy)
	w.busy &^= 1 << j
	s := p.shards[(w.start+j)&p.mask]
	s.mu.Lock()
	return s
}

// reuse prepares a buffer that comes back from the store.
func (p *Pool) reuse(b *[]byte, length int, clearing Clearing) {
	if p.debug {
		p.checkPoison(b)
	}
	s := (*b)[:length]
	clearReused(s, clearing)
	*b = s
}

// clearReused clears what clearing says of s, a reused buffer resliced to
// the length asked for.
func clearReused(s []byte, clearing Clearing) {
	switch clearing {
	case ClearLength:
		clear(s)
	case ClearCapacity:
		clear(s[:cap(s)])
	}
}

func (p *Pool) getOversize(length int, clearing Clearing) *[]byte {
	var b *[]byte
	if p.oversize && p.cls[p.classes.n].stored.Load() > 0 { // no shard locks when none is kept
		b = p.takeOversize(length)
	}
	if b == nil {
		size := length
		if length <= maxInt-(pageSize-1) {
			size = (length + pageSize - 1) &^ (pageSize - 1)
		}
		buf := make([]byte, length, size)
		p.miss(p.classes.n, &buf)
		return &buf
	}
	p.reuse(b, length, clearing)
	return b
}

// takeOversize takes the smallest retained oversize buffer that holds
// length, looking in every shard: oversize requests are rare and a miss
// allocates length bytes, so finding the best fit is worth a lock per shard
// (a walk stopping at the first shard with a fit would hand out a larger
// buffer than needed while a better one sits in the next shard).
func (p *Pool) takeOversize(length int) *[]byte {
	idx := p.classes.n
	best, bestCap := -1, 0
	for i, s := range p.shards {
		s.mu.Lock()
		fl := &s.lists[idx]
		if j := fl.bestFit(length); j >= 0 {
			if c := cap(*fl.free[j]); best < 0 || c < bestCap {
				best, bestCap = i, c
			}
		}
		s.mu.Unlock()
	}
	if best < 0 {
		return nil
	}
	s := p.shards[best]
	s.mu.Lock()
	b := s.take(idx, length)
	s.mu.Unlock()
	if b == nil {
		// Another Get took the best fit meanwhile: take whatever fits.
		b = p.take(idx, length)
	} else {
		p.cls[idx].stored.Add(-1)
	}
	return b
}

const maxInt = int(^uint(0) >> 1)

// Release drops every buffer the store holds, now, counting them as
// Released, and forgets the reserves it had learnt. Buffers in use are not
// affected and may be Put later. What the fronts hold is left to the
// garbage collector, which empties them within two collections.
func (p *Pool) Release() {
	p.releaseWhere(func(fl *freeList) int { return len(fl.free) })
	for i := range p.cls {
		p.cls[i].reserve.Store(0)
	}
}

// startIdleRelease starts the timer that releases idle buffers every
// interval. The timer's function holds only a weak pointer to p, so a pool
// nobody references can still be collected; its cleanup stops the timer.
func startIdleRelease(p *Pool, interval time.Duration) {
	wp := weak.Make(p)
	var t *time.Timer
	// Created stopped and armed below, so that t is set before the
	// function can first run.
	t = time.AfterFunc(time.Hour, func() {
		p := wp.Value()
		if p == nil {
			return
		}
		p.releaseIdle()
		t.Reset(interval)
	})
	t.Stop()
	runtime.AddCleanup(p, func(t *time.Timer) { t.Stop() }, t)
	t.Reset(interval)
}

// releaseIdle releases, in every free list, the buffers that stayed untaken
// since the previous call: the list's low-water mark. LIFO order puts them
// at the bottom of the stack. The class's reserve shrinks by as many: a
// reserve nobody drew on for a whole interval is not needed.
func (p *Pool) releaseIdle() {
	p.releaseWhere(func(fl *freeList) int { return fl.low })
}

// releaseWhere releases n(fl) buffers from the bottom of every free list,
// resets the lists' low-water marks and lowers the reserves to match.
func (p *Pool) releaseWhere(n func(*freeList) int) {
	released := make([]int64, len(p.cls))
	for _, s := range p.shards {
		s.mu.Lock()
		for i := range s.lists {
			k := n(&s.lists[i])
			s.release(i, k, p.dbg)
			s.lists[i].low = len(s.lists[i].free)
			released[i] += int64(k)
		}
		s.mu.Unlock()
	}
	for i, k := range released {
		if k > 0 {
			p.cls[i].stored.Add(-k)
			p.cls[i].lower(k)
		}
	}
}
