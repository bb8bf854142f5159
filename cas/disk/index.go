package disk

import (
	"container/list"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
)

// index is the store's key-location map: which entries exist and where
// each is (a file of its own, or a record in a pack segment), their
// recency, the store's accounting, and eviction under the maximum size.
// It answers "is k stored, and where?"; it never reads a blob's bytes.
//
// It shares the store's lock (mu): a method whose name ends in Locked
// needs it held, the others take it. Files and records leave the index
// only through it (removeLocked, dropLocked, eviction), so that the
// accounting and the eviction generation always see them go.
type index struct {
	mu      *sync.Mutex
	log     *slog.Logger
	maxSize int64 // bytes of entries and uploads in progress; 0: no limit

	files     map[entryKey]*entry   // the entries kept as files
	lru       *list.List            // files only, front: most recently used
	packed    *packindex.Table      // the packed entries, off the Go heap
	sweep     packindex.SweepCursor // where the table's sweep goes on
	isLiveSeq func(seq uint32) bool // isLiveSeqLocked as a method value, made once
	segments  *packs.Set            // the packed entries' segments; shares mu
	blobs     *blobFiles            // where a file entry lives: eviction unlinks it
	packs     *packedBlobs          // copies a hot record out of an old segment

	// tick counts uses and segments: the store's clock of recency. clock
	// maps tick to wall time, evicted records the ages of evicted
	// entries (EvictionAges).
	tick    uint64
	clock   ages.Clock
	evicted ages.Recorder
	// generation counts the times entries left the index (eviction,
	// removal): EvictionGeneration. Atomic, so that a reader need not
	// take mu.
	generation atomic.Uint64

	entries     int64 // files and live records
	bytes       int64 // on disk
	plainBytes  int64 // the entries' own sizes
	zstdEntries int64 // how many blobs are kept compressed
	partial     int64 // bytes reserved by uploads in progress (Writers); they count towards maxSize
	acEntries   int64 // how many entries are action results
	evictions   int64
	hits        int64
	misses      int64

	// changed: a record put or dropped, or a segment evicted, since the
	// last index checkpoint (checkpoints.go).
	changed bool
	// closed: the store is closed; no upload reserves room any more.
	closed bool
}

// sweepPerPut is how many slots of the table each put of a record sweeps
// (packindex.Table.Sweep): a full pass over a table of S slots every S/8
// puts, so the records of evicted segments never make up more than about
// a fifth of the table.
const sweepPerPut = 8

func newIndex(mu *sync.Mutex, maxSize int64, log *slog.Logger, segments *packs.Set, blobs *blobFiles) *index {
	x := &index{
		mu: mu, log: log, maxSize: maxSize,
		files: make(map[entryKey]*entry), lru: list.New(), packed: new(packindex.Table),
		segments: segments, blobs: blobs,
	}
	x.isLiveSeq = x.isLiveSeqLocked
	return x
}

// lookup finds k, marks it most recently used and counts a hit or a miss.
// For CAS blobs, a digest whose size differs from the stored file's is a
// different blob and so a miss. It reports an entry just committed once
// its rename is durable, so that no client is told of an entry a crash
// could still take away.
// Internal checks (is an upload already complete? are an action result's
// outputs present?) pass count=false so the counters measure clients' lookups.
func (x *index) lookup(k entryKey, size int64, count bool) (entry, bool) {
	e, ok := x.lookupPending(k, size, count)
	if e.pending != nil {
		<-e.pending.durable
	}
	return e, ok
}

// lookupPending is lookup without the wait: it returns a copy of the
// entry, whose pending is the batch whose commit of it is not yet
// durable, if any. A read need not wait: the entry's content is durable,
// and a reader that outlives a crash is no more.
func (x *index) lookupPending(k entryKey, size int64, count bool) (entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.entryLocked(k)
	if ok && (k.kind == kindAC || e.size == size) {
		x.tick++
		if e.seg == nil {
			el := x.files[k]
			x.lru.MoveToFront(el.el)
			el.used = x.tick
			e.used = x.tick
		} else {
			x.packs.refreshIfOldLocked(e)
		}
		if count {
			x.hits++
		}
		return e, true
	}
	if count {
		x.misses++
	}
	return entry{}, false
}

// entry returns a copy of entry k without touching its recency: the
// scrubber's look at it.
func (x *index) entry(k entryKey) (entry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.entryLocked(k)
}

// entryLocked returns a copy of entry k, a file's or a packed record's,
// without touching its recency.
func (x *index) entryLocked(k entryKey) (entry, bool) {
	if el, ok := x.files[k]; ok {
		return *el, true
	}
	return x.packedLocked(k)
}

// packedLocked returns the packed entry of k, if any: its record in the
// table, with its segment. A record whose segment was evicted is dropped
// from the table here (eviction leaves them to the sweep).
func (x *index) packedLocked(k entryKey) (entry, bool) {
	h, ok := packindex.ParseHash(k.hash)
	if !ok {
		return entry{}, false
	}
	r, ok := x.packed.Get(&h, k.kind == kindAC)
	if !ok {
		return entry{}, false
	}
	seg := x.segments.LiveLocked(r.Seq)
	if seg == nil {
		x.packed.Delete(&h, k.kind == kindAC)
		return entry{}, false
	}
	size := int64(r.Size)
	return entry{key: k, size: size, stored: size, seg: seg, off: int64(r.Off), crc: r.CRC, verified: r.Verified}, true
}

// isCurrentLocked reports whether opened, a copy of an entry taken
// earlier, is still its key's entry: the same file at the same
// generation, or the same record.
func (x *index) isCurrentLocked(opened entry) bool {
	if opened.seg == nil {
		el, ok := x.files[opened.key]
		return ok && el.gen == opened.gen
	}
	cur, ok := x.packedLocked(opened.key)
	return ok && cur.seg == opened.seg && cur.off == opened.off
}

// fileSumsLocked returns the block sums of the file entry of which e is a
// copy, if it is still that file (same generation) and the file open has
// its stored size; nil otherwise.
func (x *index) fileSumsLocked(e entry, size int64) []uint32 {
	if cur, ok := x.files[e.key]; ok && cur.gen == e.gen && cur.stored == size {
		return cur.sums
	}
	return nil
}

// indexCommittedLocked indexes e, just renamed into place by batch b (or
// a packed record, durable already: b is nil), as the most recently used,
// and evicts down to the maximum size. An entry kept in another form
// (plain or compressed file, or a record) is replaced, and a file of it
// removed.
func (x *index) indexCommittedLocked(e *entry, b *commitBatch) {
	if e.seg != nil {
		if old, ok := x.files[e.key]; ok {
			x.removeLocked(old)
		} else if old, ok := x.packedLocked(e.key); ok {
			x.countLocked(&old, -1)
		}
		x.putRecordLocked(e)
		x.countLocked(e, 1)
		x.evictLocked(nil)
		return
	}
	if old, ok := x.packedLocked(e.key); ok {
		x.dropLocked(&old)
	}
	if old, ok := x.files[e.key]; ok {
		// The entry keeps its identity (checks in progress hold it) and
		// takes the new form, plain or compressed.
		if x.blobs.filePath(old) != x.blobs.filePath(e) {
			x.blobs.remove(old)
		}
		x.countLocked(old, -1)
		old.size, old.stored, old.zstd = e.size, e.stored, e.zstd
		old.checked, old.verified = e.checked, e.verified
		old.crc, old.sums = e.crc, e.sums
		old.gen++
		old.pending = b
		x.countLocked(old, 1)
		x.tick++
		x.lru.MoveToFront(old.el)
		old.used = x.tick
	} else {
		e.pending = b
		x.insertLocked(e)
	}
	x.evictLocked(x.files[e.key])
}

// settledLocked ends batch b's hold on file entry k: lookups stop waiting
// for it once the batch's renames are durable.
func (x *index) settledLocked(k entryKey, b *commitBatch) {
	if e, ok := x.files[k]; ok && e.pending == b {
		e.pending = nil
	}
}

// insertLocked adds a new file entry as the most recently used.
func (x *index) insertLocked(e *entry) {
	x.tick++
	x.clock.Mark(x.tick, time.Now())
	e.used = x.tick
	e.el = x.lru.PushFront(e)
	x.files[e.key] = e
	x.countLocked(e, 1)
}

// putRecordLocked puts packed entry e in the table; its counts are the
// caller's.
func (x *index) putRecordLocked(e *entry) {
	h, _ := packindex.ParseHash(e.key.hash) // a record is only ever made for a valid hash
	x.clock.Mark(x.tick, time.Now())
	x.packed.Put(&packindex.Record{Hash: h, AC: e.key.kind == kindAC, Verified: e.verified, Seq: uint32(e.seg.Seq), Off: uint32(e.off), Size: uint32(e.size), CRC: e.crc})
	x.changed = true
	x.packed.Sweep(&x.sweep, sweepPerPut, x.isLiveSeq)
}

// setVerifiedLocked records that packed CAS blob k matched its name.
func (x *index) setVerifiedLocked(k entryKey) {
	h, _ := packindex.ParseHash(k.hash)
	x.packed.SetVerified(&h, k.kind == kindAC)
}

// isLiveSeqLocked reports whether segment seq is in the store: the
// sweep's test.
func (x *index) isLiveSeqLocked(seq uint32) bool { return x.segments.LiveLocked(seq) != nil }

// countLocked adds e to the store's totals (sign 1) or takes it out (-1).
// A packed entry's bytes are its segment's, counted when it took its slot;
// its counts are its segment's too, which eviction takes out whole.
func (x *index) countLocked(e *entry, sign int64) {
	if e.seg == nil {
		x.bytes += sign * e.stored
	} else {
		e.seg.Entries += sign
		e.seg.PlainBytes += sign * e.size
		if e.key.kind == kindAC {
			e.seg.ACEntries += sign
		}
	}
	x.entries += sign
	x.plainBytes += sign * e.size
	if e.zstd {
		x.zstdEntries += sign
	}
	if e.key.kind == kindAC {
		x.acEntries += sign
	}
}

// uncountSegmentLocked takes seg's entries out of the totals (not its
// bytes): they leave the index whole.
func (x *index) uncountSegmentLocked(seg *packs.Segment) {
	x.entries -= seg.Entries
	x.acEntries -= seg.ACEntries
	x.plainBytes -= seg.PlainBytes
	seg.Entries, seg.ACEntries, seg.PlainBytes = 0, 0, 0
}

// reserve counts n more bytes of uploads in progress towards the maximum
// size, evicting stored entries to make room. If the uploads in progress
// alone would take more than the maximum size it fails with ErrFull.
func (x *index) reserve(n int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return cas.ErrClosed
	}
	if x.maxSize > 0 && x.partial+n > x.maxSize {
		return fmt.Errorf("%w (%d of %d bytes)", cas.ErrFull, x.partial, x.maxSize)
	}
	x.partial += n
	x.evictLocked(nil)
	return nil
}

// unreserve gives back n bytes reserved.
func (x *index) unreserve(n int64) {
	if n == 0 {
		return
	}
	x.mu.Lock()
	x.partial -= n
	x.mu.Unlock()
}

// takeSlotLocked takes a slot for a record of k of size bytes in the
// active segment into sl (packs.Set.TakeSlotLocked; with fill, for a
// record whose data is at hand, TakeSlotToFillLocked) and counts the bytes
// it takes in the store's total.
func (x *index) takeSlotLocked(sl *packs.Slot, k entryKey, size int64, fill bool) error {
	take := x.segments.TakeSlotLocked
	if fill {
		take = x.segments.TakeSlotToFillLocked
	}
	err := take(sl, uint8(k.kind), k.hash, size)
	if err == nil {
		x.bytes += packfile.RecordLen(size)
	}
	return err
}

// evictLocked removes the least recently used entries until they and the
// uploads in progress fit the maximum size: of the least recently used
// file and the oldest pack segment (sealed, no writer in it), the older
// goes, the segment whole. keep, if not nil, is never evicted (the entry
// just written).
func (x *index) evictLocked(keep *entry) {
	if x.maxSize <= 0 {
		return
	}
	for x.bytes+x.partial > x.maxSize {
		el := x.lru.Back()
		if el != nil && keep != nil && el.Value.(*entry) == keep {
			el = el.Prev()
		}
		seg := x.segments.OldestEvictableLocked()
		if seg != nil && (el == nil || seg.Created < el.Value.(*entry).used) {
			x.evictSegmentLocked(seg)
			continue
		}
		if el == nil {
			return
		}
		e := el.Value.(*entry)
		x.observeEvictionLocked(e.used, 1)
		x.removeLocked(e)
		x.evictions++
		x.log.Debug("evicted", "kind", e.key.kind.dir(), "hash", e.key.hash, "size", e.size)
	}
}

// evictSegmentLocked drops seg: its entries leave the index (its records
// leave the table by the sweep), its bytes the store's total, its file the
// disk (readers still holding it keep reading until they close).
func (x *index) evictSegmentLocked(seg *packs.Segment) {
	x.generation.Add(1)
	x.observeEvictionLocked(seg.Created, seg.Entries)
	x.evictions += seg.Entries
	x.uncountSegmentLocked(seg)
	x.bytes -= seg.Size
	x.changed = true
	x.segments.EvictLocked(seg)
}

// observeEvictionLocked records n entries evicted, last used at tick used:
// their age by the store's clock, marked now so that recent ticks are
// placed against the present.
func (x *index) observeEvictionLocked(used uint64, n int64) {
	now := time.Now()
	x.clock.Mark(x.tick, now)
	if at, ok := x.clock.Time(used); ok {
		x.evicted.Observe(now, now.Sub(at), n)
	}
}

// removeLocked unlinks entry e's file, if it has one, and drops it from
// the index.
func (x *index) removeLocked(e *entry) {
	if e.seg == nil {
		x.blobs.remove(e)
	}
	x.dropLocked(e)
}

// dropLocked drops entry e from the index, leaving its bytes where they
// are: a packed entry's stay in its segment until the segment goes.
func (x *index) dropLocked(e *entry) {
	x.generation.Add(1)
	if e.seg != nil {
		h, _ := packindex.ParseHash(e.key.hash)
		x.packed.Delete(&h, e.key.kind == kindAC)
		x.changed = true
		x.countLocked(e, -1)
		return
	}
	if e.el != nil {
		x.lru.Remove(e.el)
		e.el = nil
	}
	delete(x.files, e.key)
	x.countLocked(e, -1)
}

// dropCurrentLocked drops the entry of which opened is a copy, if it is
// still its key's entry (a file: removed with its file), and reports
// whether it did: what a failed check removes.
func (x *index) dropCurrentLocked(opened entry) bool {
	if !x.isCurrentLocked(opened) {
		return false
	}
	cur, _ := x.entryLocked(opened.key)
	if cur.seg == nil {
		x.removeLocked(x.files[opened.key])
	} else {
		x.dropLocked(&cur)
	}
	return true
}

// isClosed reports whether the store was closed.
func (x *index) isClosed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closed
}
