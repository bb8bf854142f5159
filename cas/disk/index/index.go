package index

import (
	"container/list"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas/disk/ages"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
)

// Index is the disk store's key-location map: which entries exist and
// where each is (a file of its own, or a record in a pack segment), their
// recency, the store's accounting, and eviction under the maximum size.
// It answers "is k stored, and where?"; it never reads a blob's bytes.
//
// It is not safe for concurrent use and has no lock: its owner, the
// store, holds its own around every call but Generation's (the segments,
// packs.Set, which it calls, take their own inside). Entries leave it only through
// it (Drop, eviction), so that the accounting and the
// eviction generation always see them go.
type Index struct {
	log     *slog.Logger
	maxSize int64 // bytes of entries and uploads in progress; 0: no limit

	files     map[Key]*Entry        // the entries kept as files
	lru       *list.List            // files only, front: most recently used
	packed    packindex.Table       // the packed entries, off the Go heap
	sweep     packindex.SweepCursor // where the table's sweep goes on
	isLiveSeq func(seq uint32) bool // segmentLive as a method value, made once
	segments  *packs.Set            // the packed entries' segments

	// tick counts uses and segments: the store's clock of recency. clock
	// maps tick to wall time, evicted records the ages of evicted
	// entries.
	tick    uint64
	clock   ages.Clock
	evicted ages.Recorder
	// generation counts the times entries left the index (eviction,
	// removal). Atomic, so that a reader need not take the store's lock.
	generation atomic.Uint64

	totals Totals
	// changes counts records put or dropped and segments evicted: what
	// an index checkpoint taken at one count no longer says at another.
	changes uint64
}

// sweepPerPut is how many slots of the table each put of a record sweeps
// (packindex.Table.Sweep): a full pass over a table of S slots every S/8
// puts, so the records of evicted segments never make up more than about
// a fifth of the table.
const sweepPerPut = 8

// New returns an empty index of at most maxSize bytes (0: no limit),
// whose packed entries are in segments; log (nil: none) is told of
// evictions.
func New(segments *packs.Set, maxSize int64, log *slog.Logger) *Index {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	x := &Index{segments: segments, log: log, maxSize: maxSize, files: make(map[Key]*Entry), lru: list.New()}
	x.isLiveSeq = x.segmentLive
	return x
}

// Lookup finds k and marks it most recently used, and returns a
// copy of its entry, whose Pending is the batch whose commit of it is not
// yet durable, if any: a caller that tells a client of the entry waits
// for it first. For CAS blobs, a digest whose size differs from the
// stored file's is a different blob and so a miss; size -1 matches any (a
// blob named by its hash alone).
func (x *Index) Lookup(k Key, size int64) (Entry, bool) {
	e, ok := x.Get(k)
	if !ok || k.Kind != AC && e.Size != size && size >= 0 {
		return Entry{}, false
	}
	x.tick++
	if e.Seg == nil {
		el := x.files[k]
		x.lru.MoveToFront(el.el)
		el.used = x.tick
		e.used = x.tick
	}
	return e, true
}

// Get returns a copy of entry k, a file's or a packed record's,
// without touching its recency.
func (x *Index) Get(k Key) (Entry, bool) {
	if el, ok := x.files[k]; ok {
		return *el, true
	}
	return x.packedEntry(k)
}

// packedEntry returns the packed entry of k, if any: its record in the
// table, with its segment. A record whose segment was evicted is dropped
// from the table here (eviction leaves them to the sweep).
func (x *Index) packedEntry(k Key) (Entry, bool) {
	tk, ok := tableKey(k)
	if !ok {
		return Entry{}, false
	}
	r, ok := x.packed.Get(&tk)
	if !ok {
		return Entry{}, false
	}
	seg, old := x.segments.LiveOld(r.Seq)
	if seg == nil {
		x.packed.Delete(&tk)
		return Entry{}, false
	}
	size := int64(r.Size)
	return Entry{Key: k, Size: size, Stored: size, Seg: seg, Off: int64(r.Off), CRC: r.CRC, Verified: r.Verified, InOldSegment: old}, true
}

// Commit indexes e, just renamed into place by batch b (or
// a packed record, durable already: b is nil), as the most recently used,
// and evicts down to the maximum size. An entry kept in another form
// (plain or compressed file, or a record) is replaced. It returns the
// file entries whose files are no longer any entry's (the other form's,
// and those evicted): the caller removes them before it lets the lock
// go, so that no later commit of a key can put a file where one is about
// to be removed.
func (x *Index) Commit(e *Entry, b *Batch) (removed []Entry) {
	if e.Seg != nil {
		if old, ok := x.files[e.Key]; ok {
			removed = append(removed, *old)
			x.Drop(old)
		} else if old, ok := x.packedEntry(e.Key); ok {
			x.totals.add(&old, -1)
		}
		x.putRecord(e)
		x.totals.add(e, 1)
		return x.Evict(nil, removed)
	}
	if old, ok := x.packedEntry(e.Key); ok {
		x.Drop(&old)
	}
	if old, ok := x.files[e.Key]; ok {
		// The entry keeps its identity (verifications in progress hold it) and
		// takes the new form, plain or compressed; the other form's file,
		// named by its size when compressed, goes.
		if old.Zstd != e.Zstd || e.Zstd && old.Size != e.Size {
			removed = append(removed, *old)
		}
		x.totals.add(old, -1)
		old.Size, old.Stored, old.Zstd = e.Size, e.Stored, e.Zstd
		old.VerifiedAt, old.Verified = e.VerifiedAt, e.Verified
		old.CRC, old.Sums = e.CRC, e.Sums
		old.Gen++
		old.Pending = b
		x.totals.add(old, 1)
		x.tick++
		x.lru.MoveToFront(old.el)
		old.used = x.tick
	} else {
		e.Pending = b
		x.insert(e)
	}
	return x.Evict(x.files[e.Key], removed)
}

// Settled ends batch b's hold on file entry k: lookups stop waiting
// for it once the batch's renames are durable.
func (x *Index) Settled(k Key, b *Batch) {
	if e, ok := x.files[k]; ok && e.Pending == b {
		e.Pending = nil
	}
}

// insert adds a new file entry as the most recently used.
func (x *Index) insert(e *Entry) {
	x.tick++
	x.clock.Mark(x.tick, time.Now())
	e.used = x.tick
	e.el = x.lru.PushFront(e)
	x.files[e.Key] = e
	x.totals.add(e, 1)
}

// putRecord puts packed entry e in the table; its counts are the
// caller's.
func (x *Index) putRecord(e *Entry) {
	tk, _ := tableKey(e.Key) // a record is only ever made for a valid hash
	x.clock.Mark(x.tick, time.Now())
	x.packed.Put(&packindex.Record{Key: tk, Verified: e.Verified, Seq: uint32(e.Seg.Seq), Off: uint32(e.Off), Size: uint32(e.Size), CRC: e.CRC})
	x.changes++
	x.packed.Sweep(&x.sweep, sweepPerPut, x.isLiveSeq)
}

// SetVerified records that packed CAS blob k matched its name.
func (x *Index) SetVerified(k Key) {
	if tk, ok := tableKey(k); ok {
		x.packed.SetVerified(&tk)
	}
}

// tableKey is k as the table of packed entries keys it: its hash raw.
// ok is false for a hash that is not k.Fn's.
func tableKey(k Key) (packindex.Key, bool) {
	return packindex.ParseKey(k.Fn, k.Hash, k.Kind == AC)
}

// segmentLive reports whether segment seq is in the store: the
// sweep's test.
func (x *Index) segmentLive(seq uint32) bool { return x.segments.Live(seq) != nil }

// TakeSlot takes a slot for a record of k of size bytes in an
// active segment into sl (packs.Set.TakeSlot; with fill, for a
// record whose data is at hand, TakeSlotToFill; a streamed CAS
// blob's, TakeStreamSlot) and counts the bytes it takes in the
// store's total.
func (x *Index) TakeSlot(sl *packs.Slot, k Key, size int64, fill bool) error {
	take := x.segments.TakeSlot
	switch {
	case fill:
		take = x.segments.TakeSlotToFill
	case k.Kind == CAS:
		take = x.segments.TakeStreamSlot
	}
	err := take(sl, uint8(k.Kind), uint8(k.Fn), k.Hash, size)
	if err != nil {
		return err
	}
	x.totals.Bytes += packfile.RecordLen(k.Fn.Size(), size)
	if sl.Seg.Created == 0 {
		// A segment just made: a use, on the clock of recency.
		sl.Seg.Created = x.nextTick()
	}
	return nil
}

// Drop drops entry e (itself, or a copy of it as Get returns) from the
// index, leaving its bytes where they are: a file entry's file is the
// caller's to remove, a packed entry's bytes stay in its segment until
// the segment goes.
func (x *Index) Drop(e *Entry) {
	x.generation.Add(1)
	if e.Seg != nil {
		tk, _ := tableKey(e.Key)
		x.packed.Delete(&tk)
		x.changes++
		x.totals.add(e, -1)
		return
	}
	if e.el != nil {
		x.lru.Remove(e.el)
		e.el = nil
	}
	delete(x.files, e.Key)
	x.totals.add(e, -1)
}

// File returns file entry k itself, if k is kept as a file: the
// checks record their verdicts on it.
func (x *Index) File(k Key) (*Entry, bool) {
	e, ok := x.files[k]
	return e, ok
}

// Table is the table of packed entries, for the index checkpoint to
// write and load.
func (x *Index) Table() *packindex.Table { return &x.packed }

// Changes counts the records put or dropped and the segments evicted
// since the index was made, those of a start's checkpoint excepted.
func (x *Index) Changes() uint64 { return x.changes }
