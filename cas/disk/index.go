package disk

import (
	"container/list"
	"time"

	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/packs"
)

// entryKind separates the two namespaces on disk and in the index.
type entryKind uint8

const (
	kindCAS entryKind = iota // content-addressed blob, named by its own hash
	kindAC                   // action result, named by its action's hash
)

func (k entryKind) dir() string {
	if k == kindAC {
		return "ac"
	}
	return "cas"
}

type entryKey struct {
	kind entryKind
	hash string
}

type entry struct {
	// Fields are ordered largest first, so that the struct packs into
	// 128 bytes: the index holds one per stored blob.
	key    entryKey
	size   int64 // the blob's (or action result's) own size
	stored int64 // bytes on disk: size, or less if kept compressed

	// Guarded by Store.mu; see verify.go.
	checked int64      // modification time (UnixNano) of the file when this process last found it matching its name; 0: never
	check   *blobCheck // a re-hash in progress, for others to wait on
	// pending is the commit batch that put this entry in place, until its
	// rename is durable; lookups that report the entry present wait for it.
	pending *commitBatch

	// A packed entry (packs.go) is a record in seg, its data at off; nil:
	// a file of its own.
	seg *packs.Segment
	off int64
	// What every read checks (readcheck.go): a file's block sums (of the
	// file as stored, compressed or not), nil until this process has
	// hashed the file; a packed entry's record CRC (crc, below).
	sums []uint32
	// used is Store.tick when a file entry was last used: its age against
	// the oldest segment's, for eviction.
	used uint64
	// el is a file entry's place in Store.lru (its recency); nil for a
	// packed entry, whose segment's age is its own.
	el *list.Element

	gen uint32 // counts commits over this entry, so a check of a replaced file removes nothing
	crc uint32 // a packed entry's record CRC
	// verified: this process has found a packed CAS blob matching its
	// name (a segment's time says nothing of a record).
	verified bool
	zstd     bool // kept compressed, in a file named by files.ZstdPath
}

// lookup finds k and marks it most recently used. For CAS blobs, a
// digest whose size differs from the stored file's is a different blob
// and so a miss; size -1 matches any (a blob named by its hash alone).
func (s *Store) lookup(k entryKey, size int64) (entry, bool) {
	e, ok := s.lookupPending(k, size)
	if e.pending != nil {
		// Just committed: report it once its rename is durable, so that
		// no client is told of an entry a crash could still take away.
		<-e.pending.durable
	}
	return e, ok
}

// lookupPending is lookup without the wait: it returns a copy of the
// entry, whose pending is the batch whose commit of it is not yet
// durable, if any.
func (s *Store) lookupPending(k entryKey, size int64) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entryLocked(k)
	if ok && (k.kind == kindAC || e.size == size || size < 0) {
		s.tick++
		if e.seg == nil {
			el := s.files[k]
			s.lru.MoveToFront(el.el)
			el.used = s.tick
			e.used = s.tick
		} else {
			s.refreshIfOldLocked(e)
		}
		return e, true
	}
	return entry{}, false
}

// entryLocked returns a copy of entry k, a file's or a packed record's,
// without touching its recency.
func (s *Store) entryLocked(k entryKey) (entry, bool) {
	if el, ok := s.files[k]; ok {
		return *el, true
	}
	return s.packedLocked(k)
}

// packedLocked returns the packed entry of k, if any: its record in the
// table, with its segment. A record whose segment was evicted is dropped
// from the table here (eviction leaves them to the sweep, sweepLocked).
func (s *Store) packedLocked(k entryKey) (entry, bool) {
	h, ok := packindex.ParseHash(k.hash)
	if !ok {
		return entry{}, false
	}
	r, ok := s.packed.Get(&h, k.kind == kindAC)
	if !ok {
		return entry{}, false
	}
	seg := s.segments.LiveLocked(r.Seq)
	if seg == nil {
		s.packed.Delete(&h, k.kind == kindAC)
		return entry{}, false
	}
	size := int64(r.Size)
	return entry{key: k, size: size, stored: size, seg: seg, off: int64(r.Off), crc: r.CRC, verified: r.Verified}, true
}

// isCurrentLocked reports whether opened, a copy of an entry taken
// earlier, is still k's entry: the same file at the same generation, or
// the same record.
func (s *Store) isCurrentLocked(opened entry) bool {
	if opened.seg == nil {
		el, ok := s.files[opened.key]
		return ok && el.gen == opened.gen
	}
	cur, ok := s.packedLocked(opened.key)
	return ok && cur.seg == opened.seg && cur.off == opened.off
}

// indexCommittedLocked indexes e, just renamed into place by batch b (or
// a packed record, durable already: b is nil), as the most recently used,
// and evicts down to the maximum size. An entry kept in another form
// (plain or compressed file, or a record) is replaced, and a file of it
// removed.
func (s *Store) indexCommittedLocked(e *entry, b *commitBatch) {
	if e.seg != nil {
		if old, ok := s.files[e.key]; ok {
			s.removeLocked(old)
		} else if old, ok := s.packedLocked(e.key); ok {
			s.uncountLocked(&old)
		}
		s.putRecordLocked(e)
		s.countLocked(e)
		s.evictLocked(nil)
		return
	}
	if old, ok := s.packedLocked(e.key); ok {
		s.dropLocked(&old)
	}
	if el, ok := s.files[e.key]; ok {
		// The entry keeps its identity (checks in progress hold it) and
		// takes the new form, plain or compressed.
		old := el
		if s.filePath(old) != s.filePath(e) {
			s.removeFile(old)
		}
		s.uncountLocked(old)
		old.size, old.stored, old.zstd = e.size, e.stored, e.zstd
		old.checked, old.verified = e.checked, e.verified
		old.crc, old.sums = e.crc, e.sums
		old.gen++
		old.pending = b
		s.countLocked(old)
		s.tick++
		s.lru.MoveToFront(old.el)
		old.used = s.tick
	} else {
		e.pending = b
		s.insertLocked(e)
	}
	s.evictLocked(s.files[e.key])
}

// insertLocked adds a new file entry as the most recently used.
func (s *Store) insertLocked(e *entry) {
	s.tick++
	s.clock.Mark(s.tick, time.Now())
	e.used = s.tick
	e.el = s.lru.PushFront(e)
	s.files[e.key] = e
	s.countLocked(e)
}

// putRecordLocked puts packed entry e in the table; its counts are the
// caller's.
func (s *Store) putRecordLocked(e *entry) {
	h, _ := packindex.ParseHash(e.key.hash) // a record is only ever made for a valid hash
	s.clock.Mark(s.tick, time.Now())
	s.packed.Put(&packindex.Record{Hash: h, AC: e.key.kind == kindAC, Verified: e.verified, Seq: uint32(e.seg.Seq), Off: uint32(e.off), Size: uint32(e.size), CRC: e.crc})
	s.indexChanged = true
	s.sweepLocked(sweepPerPut)
}

// countLocked adds e to the store's totals; uncountLocked takes it out.
// A packed entry's bytes are its segment's, counted when it took its slot;
// its counts are its segment's too, which eviction takes out whole.
func (s *Store) countLocked(e *entry) {
	s.countEntry(e, 1)
}

func (s *Store) uncountLocked(e *entry) {
	s.countEntry(e, -1)
}

func (s *Store) countEntry(e *entry, sign int64) {
	if e.seg == nil {
		s.bytes += sign * e.stored
	} else {
		e.seg.Entries += sign
		e.seg.PlainBytes += sign * e.size
		if e.key.kind == kindAC {
			e.seg.ACEntries += sign
		}
	}
	s.entries += sign
	s.plainBytes += sign * e.size
	if e.zstd {
		s.zstdEntries += sign
	}
	if e.key.kind == kindAC {
		s.acEntries += sign
	}
}

// evictLocked removes the least recently used entries until they and the
// uploads in progress fit the maximum size: of the least recently used
// file and the oldest pack segment (sealed, no writer in it), the older
// goes, the segment whole. keep, if not nil, is never evicted (the entry
// just written).
func (s *Store) evictLocked(keep *entry) {
	if s.maxSize <= 0 {
		return
	}
	for s.bytes+s.partial > s.maxSize {
		el := s.lru.Back()
		if el != nil && keep != nil && el.Value.(*entry) == keep {
			el = el.Prev()
		}
		seg := s.segments.OldestEvictableLocked()
		if seg != nil && (el == nil || seg.Created < el.Value.(*entry).used) {
			s.evictSegmentLocked(seg)
			continue
		}
		if el == nil {
			return
		}
		e := el.Value.(*entry)
		s.observeEvictionLocked(e.used, 1)
		s.removeLocked(e)
		s.evictions++
		s.log.Debug("evicted", "kind", e.key.kind.dir(), "hash", e.key.hash, "size", e.size)
	}
}

// observeEvictionLocked records n entries evicted, last used at tick used:
// their age by the store's clock, marked now so that recent ticks are
// placed against the present.
func (s *Store) observeEvictionLocked(used uint64, n int64) {
	now := time.Now()
	s.clock.Mark(s.tick, now)
	if at, ok := s.clock.Time(used); ok {
		s.evicted.Observe(now, now.Sub(at), n)
	}
}
