package membuf

// ClassStats counts what a pool did in one size class. In every snapshot
// from [Pool.Stats],
//
//	Gets == Hits + Misses
//	RetainedBuffers == StorePuts - StoreHits - Released
//
// hold exactly, and Puts - StorePuts - Drops is what went to the front. The
// first is how Gets is computed; the second holds because the store's
// figures are read under the lock they are changed under. Which figures
// are exact, and which may lag the calls made: see [Pool.Stats].
type ClassStats struct {
	// Size is the class size in bytes; 0 for the oversize figures, which
	// cover every capacity above MaxSize.
	Size int
	// Gets counts Get calls served from this class. Hits were served with
	// a buffer the pool had (StoreHits of them from the store, the rest
	// from the front), Misses allocated a new one.
	Gets, Hits, Misses, StoreHits uint64
	// Puts counts buffers filed into this class by capacity: StorePuts of
	// them went to the store, Drops were not kept (oversize not retained,
	// or in debug mode a full store), and the rest went to the front.
	Puts, StorePuts, Drops uint64
	// Released counts buffers let go from the store by idle release or
	// [Pool.Release].
	Released uint64
	// RetainedBuffers and RetainedBytes (by capacity) are what the store
	// holds now. What the front holds is not known: the garbage collector
	// empties it unseen (see [Pool]).
	RetainedBuffers, RetainedBytes int64
}

func (c *ClassStats) add(o *ClassStats) {
	c.Gets += o.Gets
	c.Hits += o.Hits
	c.Misses += o.Misses
	c.StoreHits += o.StoreHits
	c.Puts += o.Puts
	c.StorePuts += o.StorePuts
	c.Drops += o.Drops
	c.Released += o.Released
	c.RetainedBuffers += o.RetainedBuffers
	c.RetainedBytes += o.RetainedBytes
}

// Stats is a snapshot of a pool's counters, from [Pool.Stats].
type Stats struct {
	// Classes has one entry per size class, smallest first.
	Classes []ClassStats
	// Oversize counts Gets above MaxSize and Puts of capacities above it.
	Oversize ClassStats
	// Undersize counts Puts dropped because the pointer was nil or the
	// capacity was below MinSize.
	Undersize uint64
	// RetainedBytes is the capacity the store holds in all classes; never
	// above Budget.
	RetainedBytes int64
	// Budget is the cap on RetainedBytes.
	Budget int64
	// Shards is the number of independently locked parts of the store.
	Shards int
}

// Total sums the classes and the oversize figures.
func (s Stats) Total() ClassStats {
	var t ClassStats
	for i := range s.Classes {
		t.add(&s.Classes[i])
	}
	t.add(&s.Oversize)
	return t
}

// HitRate is Hits/Gets over all classes, or 0 before the first Get.
func (s Stats) HitRate() float64 {
	t := s.Total()
	if t.Gets == 0 {
		return 0
	}
	return float64(t.Hits) / float64(t.Gets)
}

// Stats returns a snapshot of the pool's counters.
//
// Exact, once Gets and Puts have stopped: Misses, StoreHits, StorePuts,
// Drops, Released, RetainedBuffers, RetainedBytes and Undersize, every
// one of them in every class and in Oversize; these are counted under a
// shard lock or with an atomic add, off the fast path.
//
// Not exact under concurrency: the front's hits and puts, and so Hits,
// Gets (Hits + Misses) and Puts. The fast path (a Get the front serves, a
// Put the front takes) counts with a plain increment, not a locked
// instruction, so two goroutines on different Ps that count a buffer of
// one class into the same stripe (8 stripes per P) at the same instant
// may lose one of the increments. The figures then lag the calls made,
// never run ahead of them, and never decrease from one snapshot to the
// next. Calls ordered by synchronization (made by one goroutine, or by
// goroutines that hand over through a channel or a lock) are counted
// exactly; under the race detector, and where a
// uint64 is not a machine word (32-bit platforms), the front counts with
// atomic adds and every figure is exact. Outstanding buffers read as Gets
// less Puts are therefore an estimate under concurrency.
//
// While Gets and Puts run, the store's figures are consistent per shard
// (each shard is read under its lock, in turn), and the stripes are read
// one after the other, so a snapshot may also miss the operations that
// complete while it reads. It takes every shard's lock once and reads a
// few thousand words: call it as often as a metrics scrape, not per
// request.
func (p *Pool) Stats() Stats {
	n := p.classes.n
	st := Stats{
		Classes:   make([]ClassStats, n),
		Undersize: p.undersize.Load(),
		Budget:    p.budget,
		Shards:    len(p.shards),
	}
	class := func(i int) *ClassStats {
		if i < n {
			return &st.Classes[i]
		}
		return &st.Oversize
	}
	for _, s := range p.shards {
		s.mu.Lock()
		for i := range s.lists {
			fl, cs := &s.lists[i], class(i)
			cs.StoreHits += fl.hits
			cs.StorePuts += fl.puts
			cs.Released += fl.release
			cs.RetainedBuffers += int64(len(fl.free))
			cs.RetainedBytes += fl.bytes
		}
		st.RetainedBytes += s.retained
		s.mu.Unlock()
	}
	for i := 0; i <= n; i++ {
		cs := class(i)
		if i < n {
			cs.Size = p.classes.size(i)
		}
		frontHits, frontPuts, misses, drops := p.counts.sum(i)
		frontHits, frontPuts = p.monotonic(i, frontHits, frontPuts)
		cs.Hits = frontHits + cs.StoreHits
		cs.Misses = misses
		cs.Gets = cs.Hits + cs.Misses
		cs.Drops = drops
		cs.Puts = frontPuts + cs.StorePuts + drops
	}
	return st
}

// monotonic returns class i's front counts as Stats reports them: never
// below what an earlier snapshot reported, which a lost increment could
// otherwise take them under (a counter exported to Prometheus must not go
// back).
func (p *Pool) monotonic(i int, hits, puts uint64) (uint64, uint64) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	sh := &p.shown[i]
	sh.hits = max(sh.hits, hits)
	sh.puts = max(sh.puts, puts)
	return sh.hits, sh.puts
}
