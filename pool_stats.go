package membuf

// ClassStats counts what a pool did in one size class. In a snapshot from
// [Pool.Stats], for a RetainBudget pool,
//
//	Gets == Hits + Misses
//	RetainedBuffers == Puts - Drops - Hits - Released
//
// hold exactly (each shard's figures are read under its lock, and every
// operation is counted under the lock of the shard it touched).
type ClassStats struct {
	// Size is the class size in bytes; 0 for the oversize figures, which
	// cover every capacity above MaxSize.
	Size int
	// Gets counts Get calls served from this class. Hits were served from
	// a retained buffer, Misses allocated a new one.
	Gets, Hits, Misses uint64
	// Puts counts buffers filed into this class by capacity; Drops those of
	// them that were not kept (over budget, or oversize not retained).
	Puts, Drops uint64
	// Released counts retained buffers let go by idle release or
	// [Pool.Release].
	Released uint64
	// RetainedBuffers and RetainedBytes (by capacity) are what the class
	// holds now; -1 for a RetainSyncPool pool, whose contents the garbage
	// collector changes unseen.
	RetainedBuffers, RetainedBytes int64
}

func (c *ClassStats) add(o *ClassStats) {
	c.Gets += o.Gets
	c.Hits += o.Hits
	c.Misses += o.Misses
	c.Puts += o.Puts
	c.Drops += o.Drops
	c.Released += o.Released
	c.RetainedBuffers += o.RetainedBuffers
	c.RetainedBytes += o.RetainedBytes
}

// Stats is a snapshot of a pool's counters, from [Pool.Stats].
//
// For a RetainSyncPool pool, Gets, Misses and Puts are exact and Hits is
// Gets - Misses, but the garbage collector empties a sync.Pool without
// telling anyone: RetainedBuffers, RetainedBytes and the pool's
// RetainedBytes are -1, Released is 0, and Drops counts only oversize
// buffers.
type Stats struct {
	// Classes has one entry per size class, smallest first.
	Classes []ClassStats
	// Oversize counts Gets above MaxSize and Puts of capacities above it.
	Oversize ClassStats
	// Undersize counts Puts dropped because the pointer was nil or the
	// capacity was below MinSize.
	Undersize uint64
	// RetainedBytes is the capacity retained in all classes; never above
	// Budget. -1 for a RetainSyncPool pool.
	RetainedBytes int64
	// Budget is the cap on RetainedBytes; 0 for a RetainSyncPool pool.
	Budget int64
	// Shards is the number of independently locked free-list sets.
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

// Stats returns a snapshot of the pool's counters. It takes each shard's
// lock in turn, so it is consistent per shard, not across shards; call it
// as often as a metrics scrape, not per request.
func (p *Pool) Stats() Stats {
	n := p.classes.n
	st := Stats{
		Classes:   make([]ClassStats, n),
		Undersize: p.undersize.Load(),
		Budget:    p.budget,
		Shards:    len(p.shards),
	}
	for i := range st.Classes {
		st.Classes[i].Size = p.classes.size(i)
	}
	if p.sync != nil {
		st.RetainedBytes = -1
		for i := range p.sync {
			sc := &p.sync[i]
			cs := &st.Oversize
			if i < n {
				cs = &st.Classes[i]
			}
			// get counts the get before its miss, put the put before its
			// drop: reading each pair in the opposite order keeps a
			// concurrent snapshot consistent (Misses <= Gets, so Hits
			// cannot wrap around).
			cs.Misses = sc.misses.Load()
			cs.Gets = sc.gets.Load()
			cs.Hits = cs.Gets - cs.Misses
			cs.Drops = sc.drops.Load()
			cs.Puts = sc.puts.Load()
			cs.RetainedBuffers, cs.RetainedBytes = -1, -1
		}
		return st
	}
	for _, s := range p.shards {
		s.mu.Lock()
		for i := range s.lists {
			cs := &st.Oversize
			if i < n {
				cs = &st.Classes[i]
			}
			cs.add(&s.lists[i].ClassStats)
		}
		st.RetainedBytes += s.retained
		s.mu.Unlock()
	}
	return st
}
