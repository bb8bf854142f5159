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
type Pool struct {
	classes  classTable
	clearing Clearing
	debug    bool
	oversize bool // retain buffers above MaxSize (RetainBudget only)

	// RetainBudget: shards, each with its own lock and a Budget/len(shards)
	// share of the budget. mask = len(shards)-1.
	shards []*shard
	mask   int
	budget int64

	// RetainSyncPool: one sync.Pool per class; the last entry counts
	// oversize requests.
	sync []syncClass

	undersize atomic.Uint64 // Puts of nil or below MinSize
	dbg       *poolDebug
}

// NewPool returns a pool configured by cfg, or a *[ConfigError] naming the
// first invalid field.
func NewPool(cfg Config) (*Pool, error) {
	r, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	p := &Pool{
		classes:  newClassTable(r.shift, r.MinSize, r.MaxSize),
		clearing: r.Clearing,
		debug:    r.Debug,
	}
	if r.Retention == RetainSyncPool {
		p.sync = make([]syncClass, p.classes.n+1)
		return p, nil
	}
	if p.debug {
		// Put stacks, for reports of writes after free. A RetainSyncPool
		// pool keeps none: it cannot tell when the GC takes a buffer, so
		// the map would pin every buffer it was ever given.
		p.dbg = newPoolDebug()
	}
	p.oversize = r.RetainOversize
	p.budget = r.Budget
	n := shardCount(runtime.GOMAXPROCS(0), r.Budget, r.MaxSize)
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
	if length <= 0 {
		return new([]byte)
	}
	if length > p.classes.maxSize {
		return p.getOversize(length)
	}
	c := p.classes.getIndex(length)
	var b *[]byte
	if p.sync != nil {
		b = p.sync[c].get()
	} else {
		b = p.take(c, length)
	}
	if b == nil {
		buf := make([]byte, length, p.classes.size(c))
		return &buf
	}
	p.reuse(b, length)
	return b
}

// Put returns b for reuse. Any slice the caller owns is accepted, not only
// slices from this pool: it is filed by its capacity into the largest class
// it fills, so a buffer that was resliced (or came from elsewhere) serves
// requests of that class. Put drops, and counts, without panicking:
//   - nil, a pointer to a nil or zero-capacity slice, or a capacity below
//     MinSize (Stats.Undersize);
//   - a capacity above MaxSize, unless RetainOversize (Stats.Oversize.Drops);
//   - a buffer that would take the pool over its budget (the class's Drops).
//
// After Put the caller must not use b or the slice again.
func (p *Pool) Put(b *[]byte) {
	if b == nil || cap(*b) < p.classes.minSize {
		p.undersize.Add(1)
		return
	}
	c := cap(*b)
	idx := p.classes.n // oversize
	if c <= p.classes.maxSize {
		idx = p.classes.putIndex(c)
	}
	if idx == p.classes.n && !p.oversize {
		// Never kept: count the put and its drop, in one shard.
		if p.sync != nil {
			p.sync[idx].put(b, false)
		} else {
			p.fileWith(p.walkOne(), idx, b, nil)
		}
		return
	}
	var st *stack
	if p.debug {
		st = p.poison(b)
	}
	if p.sync != nil {
		p.sync[idx].put(b, true)
		return
	}
	p.fileWith(p.walk(), idx, b, st)
}

// take pops a buffer of class c from the first shard that has one (see
// shardWalk). The get and its hit or miss are counted in the shard that
// served it, or in the last one visited.
func (p *Pool) take(c, length int) *[]byte { return p.takeWith(p.walk(), c, length) }

// takeWith is take over the shards w visits.
func (p *Pool) takeWith(w shardWalk, c, length int) *[]byte {
	for {
		s, last := w.next()
		b := s.take(c, length, last)
		s.mu.Unlock()
		if b != nil || last {
			return b
		}
	}
}

// fileWith keeps b in list idx of the first shard with room that w visits;
// the put (and its drop, if no shard had room) is counted in the shard that
// kept it, or in the last one visited.
func (p *Pool) fileWith(w shardWalk, idx int, b *[]byte, st *stack) {
	for {
		s, last := w.next()
		if p.fileIn(s, idx, b, st, last) {
			return
		}
	}
}

// shardWalk visits every shard once from a random start: first the shards
// whose lock is free (TryLock), then, waiting, the ones that were busy, so
// that a Get or Put goes around a busy shard rather than queue on it.
type shardWalk struct {
	p     *Pool
	start int
	j     int    // next position of the first pass
	busy  uint64 // bit j: the shard at position j was busy in the first pass
	left  int    // shards not yet visited
}

func (p *Pool) walk() shardWalk {
	return shardWalk{p: p, start: p.start(), left: len(p.shards)}
}

// walkOne visits a single shard, the first free one: for a get or put whose
// outcome is known before any shard is looked at, which only needs counting.
func (p *Pool) walkOne() shardWalk {
	return shardWalk{p: p, start: p.start(), left: 1}
}

// next returns the next shard, locked, and whether it is the last one the
// walk visits. It must not be called again after last.
func (w *shardWalk) next() (s *shard, last bool) {
	p := w.p
	for w.j < len(p.shards) {
		j := w.j
		w.j++
		s = p.shards[(w.start+j)&p.mask]
		if !s.mu.TryLock() {
			if j < 64 { // beyond 64 shards, wait at once: busy has 64 bits
				w.busy |= 1 << j
				continue
			}
			s.mu.Lock()
		}
		w.left--
		return s, w.left == 0
	}
	j := bits.TrailingZeros64(w.busy)
	w.busy &^= 1 << j
	s = p.shards[(w.start+j)&p.mask]
	s.mu.Lock()
	w.left--
	return s, w.left == 0
}

// fileIn tries to keep b in s, which is locked, and unlocks it. It reports
// whether the Put is settled: kept, or dropped because s was the last shard.
func (p *Pool) fileIn(s *shard, idx int, b *[]byte, st *stack, last bool) bool {
	kept := s.put(idx, b, p.oversize || idx < p.classes.n, last)
	if kept && st != nil {
		p.dbg.record(b, st) // under the shard lock: no Get can see b before its stack is recorded
	}
	s.mu.Unlock()
	return kept || last
}

// start returns a random first shard: rand.Uint32 is the runtime's cheap
// per-thread generator, so concurrent callers spread over the shards
// without sharing a cache line.
func (p *Pool) start() int {
	if p.mask == 0 {
		return 0
	}
	return int(rand.Uint32()) & p.mask
}

// reuse prepares a buffer that comes back from the free lists.
func (p *Pool) reuse(b *[]byte, length int) {
	if p.debug {
		p.checkPoison(b)
	}
	s := (*b)[:length]
	switch p.clearing {
	case ClearLength:
		clear(s)
	case ClearCapacity:
		clear(s[:cap(s)])
	}
	*b = s
}

func (p *Pool) getOversize(length int) *[]byte {
	size := length
	if length <= maxInt-(pageSize-1) {
		size = (length + pageSize - 1) &^ (pageSize - 1)
	}
	var b *[]byte
	if p.sync != nil {
		p.sync[p.classes.n].miss()
	} else if !p.oversize {
		b = p.takeWith(p.walkOne(), p.classes.n, length) // nothing is kept: counts the miss
	} else {
		b = p.takeOversize(length)
	}
	if b == nil {
		buf := make([]byte, length, size)
		return &buf
	}
	p.reuse(b, length)
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
	if best >= 0 {
		s := p.shards[best]
		s.mu.Lock()
		b := s.take(idx, length, false)
		s.mu.Unlock()
		if b != nil {
			return b
		}
	}
	if best < 0 {
		return p.takeWith(p.walkOne(), idx, length) // none fits: counts the miss
	}
	// Another Get took the best fit meanwhile: the ordinary walk takes
	// whatever fits and counts the get and its hit or miss.
	return p.take(idx, length)
}

const maxInt = int(^uint(0) >> 1)

// Release drops every buffer a RetainBudget pool retains, now, counting
// them as Released. Buffers in use are not affected and may be Put later.
// It does nothing for a RetainSyncPool pool.
func (p *Pool) Release() {
	for _, s := range p.shards {
		s.mu.Lock()
		for i := range s.lists {
			s.release(i, len(s.lists[i].free), p.dbg)
		}
		s.mu.Unlock()
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
// at the bottom of the stack.
func (p *Pool) releaseIdle() {
	for _, s := range p.shards {
		s.mu.Lock()
		for i := range s.lists {
			s.release(i, s.lists[i].low, p.dbg)
			s.lists[i].low = len(s.lists[i].free)
		}
		s.mu.Unlock()
	}
}
