package membuf

// ClassStats counts what a pool did in one size class. In every snapshot
// from [Pool.Stats],
//
//	Gets == Hits + Misses
//	RetainedBuffers == StorePuts - StoreHits - Released
//
// hold exactly, and Puts - StorePuts - Drops is what went to the front. The
// first is how Gets is computed; the second holds because the store's
// figures are read under the lock they are changed under.
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

// Stats returns a snapshot of the pool's counters. Every figure is exact
// once Gets and Puts have stopped. While they run, the store's figures are
// consistent per shard (each shard is read under its lock, in turn), and
// the front's, the misses and the drops (atomic counters in stripes, summed)
// may miss the operations that complete while Stats reads them: no figure
// lags by more than that. It takes every shard's lock once and reads a few
// thousand words: call it as often as a metrics scrape, not per request.
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
		cs.Hits = frontHits + cs.StoreHits
		cs.Misses = misses
		cs.Gets = cs.Hits + cs.Misses
		cs.Drops = drops
		cs.Puts = frontPuts + cs.StorePuts + drops
	}
	return st
}
