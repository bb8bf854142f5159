package index

import (
	"fmt"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/disk/packs"
)

// Recency and eviction. Every use of an entry and every segment made
// advances the index's clock (tick); a file entry remembers the tick of
// its last use, a segment the tick it was made at. Eviction takes the
// older of the least recently used file and the oldest evictable segment,
// until the entries and the uploads in progress fit the maximum size.

// Reserve counts n more bytes of uploads in progress towards the
// maximum size, evicting stored entries to make space (the file entries
// evicted are returned, as by Evict). If the uploads in progress
// alone would take more than the maximum size it fails with ErrFull.
func (x *Index) Reserve(n int64) ([]Entry, error) {
	if x.maxSize > 0 && x.totals.Partial+n > x.maxSize {
		return nil, fmt.Errorf("%w (%d of %d bytes)", cas.ErrFull, x.totals.Partial, x.maxSize)
	}
	x.totals.Partial += n
	return x.Evict(nil, nil), nil
}

// Evict removes the least recently used entries until they and the
// uploads in progress fit the maximum Size: of the least recently used
// file and the oldest pack segment (sealed, no writer in it), the older
// goes, the segment whole. keep, if not nil, is never evicted (the entry
// just written). It returns removed with the file entries evicted
// appended: their files are the caller's to remove before it lets the
// lock go (a segment's file is its set's).
func (x *Index) Evict(keep *Entry, removed []Entry) []Entry {
	if x.maxSize <= 0 {
		return removed
	}
	for x.totals.Bytes+x.totals.Partial > x.maxSize {
		el := x.lru.Back()
		if el != nil && keep != nil && el.Value.(*Entry) == keep {
			el = el.Prev()
		}
		seg := x.segments.OldestEvictable()
		if seg != nil && (el == nil || seg.Created < el.Value.(*Entry).used) {
			x.evictSegment(seg)
			continue
		}
		if el == nil {
			return removed
		}
		e := el.Value.(*Entry)
		x.observeEviction(e.used, 1)
		removed = append(removed, *e)
		x.Drop(e)
		x.totals.Evictions++
		x.log.Debug("evicted", "kind", e.Key.Kind.Dir(), "hash", e.Key.Hash, "size", e.Size)
	}
	return removed
}

// evictSegment drops Seg: its entries leave the index (its records
// leave the table by the sweep), its bytes the store's total, its file the
// disk (readers still holding it keep reading until they close).
func (x *Index) evictSegment(seg *packs.Segment) {
	x.generation.Add(1)
	x.observeEviction(seg.Created, seg.Entries)
	x.totals.Evictions += seg.Entries
	x.totals.dropSegment(seg)
	x.totals.Bytes -= seg.Size
	x.changes++
	x.segments.Evict(seg)
}

// observeEviction records n entries evicted, last used at tick used:
// their age by the store's clock, marked now so that recent ticks are
// placed against the present.
func (x *Index) observeEviction(used uint64, n int64) {
	now := time.Now()
	x.clock.Mark(x.tick, now)
	if at, ok := x.clock.Time(used); ok {
		x.evicted.Observe(now, now.Sub(at), n)
	}
}

// nextTick advances the clock of recency and returns it: a
// segment made counts as a use.
func (x *Index) nextTick() uint64 {
	x.tick++
	return x.tick
}

// Generation counts the times entries have left the index (evicted, or
// removed as corrupt): while it has not changed, every entry found
// earlier still is there. It takes no lock.
func (x *Index) Generation() uint64 { return x.generation.Load() }

// EvictionAges returns how old the entries evicted so far were, by the
// time they were last used (a packed entry: its segment's last write).
func (x *Index) EvictionAges(now time.Time) ages.Evictions {
	return x.evicted.Snapshot(now)
}

// order sets the recency of what a start found, on one clock:
// files (modTimes[i] the modification time of files[i], oldest first)
// and segments (oldest first), those older than the oldest segment first,
// so that eviction takes the older of the two kinds. It counts the
// segments' bytes.
func (x *Index) order(files []*Entry, modTimes []time.Time, segs []*packs.Segment) {
	for _, seg := range segs {
		x.totals.Bytes += seg.Size
	}
	x.tick = 0
	x.clock = ages.Clock{} // Insert marked the ticks at the time of reading
	si := 0
	for i, e := range files {
		for si < len(segs) && segs[si].ModTime().Before(modTimes[i]) {
			x.tick++
			segs[si].Created = x.tick
			x.clock.Mark(x.tick, segs[si].ModTime())
			si++
		}
		x.tick++
		x.clock.Mark(x.tick, modTimes[i])
		if el, ok := x.files[e.Key]; ok && el == e {
			e.used = x.tick
		}
	}
	for ; si < len(segs); si++ {
		x.tick++
		segs[si].Created = x.tick
		x.clock.Mark(x.tick, segs[si].ModTime())
	}
}
