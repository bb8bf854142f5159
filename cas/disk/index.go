package disk

import (
	"container/list"
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
	seg *segment
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
	zstd     bool // kept compressed (zstdblob.go), in a file named by zstdPath
}

// lookup finds k, marks it most recently used and counts a hit or a miss.
// For CAS blobs, a digest whose size differs from the stored file's is a
// different blob and so a miss.
// Internal checks (is an upload already complete? are an action result's
// outputs present?) pass count=false so the counters measure clients' lookups.
func (s *Store) lookup(k entryKey, size int64, count bool) (entry, bool) {
	e, ok := s.lookupPending(k, size, count)
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
func (s *Store) lookupPending(k entryKey, size int64, count bool) (entry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.index[k]
	if ok && (k.kind == kindAC || el.size == size) {
		e := el
		s.tick++
		if e.seg == nil {
			s.lru.MoveToFront(e.el)
			e.used = s.tick
		} else {
			s.refreshIfOldLocked(el)
		}
		if count {
			s.hits++
		}
		return *e, true
	}
	if count {
		s.misses++
	}
	return entry{}, false
}

// indexCommittedLocked indexes e, just renamed into place by batch b, as
// the most recently used, and evicts down to the maximum size. An entry
// kept in the other form (plain or compressed) is replaced and its file
// removed.
func (s *Store) indexCommittedLocked(e *entry, b *commitBatch) {
	if el, ok := s.index[e.key]; ok {
		// The entry keeps its identity (checks in progress hold it) and
		// takes the new form: a file (plain or compressed) or a record.
		old := el
		if old.seg == nil && (e.seg != nil || s.filePath(old) != s.filePath(e)) {
			s.removeFile(old)
		}
		s.uncountLocked(old)
		wasFile := old.seg == nil
		old.size, old.stored, old.zstd = e.size, e.stored, e.zstd
		old.checked, old.seg, old.off, old.verified = e.checked, e.seg, e.off, e.verified
		old.crc, old.sums = e.crc, e.sums
		old.gen++
		old.pending = b
		s.countLocked(old)
		s.tick++
		switch {
		case old.seg != nil && wasFile:
			s.lru.Remove(old.el) // out of the files' recency
			old.el = nil
		case old.seg == nil && !wasFile:
			old.el = s.lru.PushFront(old)
		case old.seg == nil:
			s.lru.MoveToFront(old.el)
		}
		old.used = s.tick
	} else {
		e.pending = b
		s.insertLocked(e)
	}
	s.evictLocked(s.index[e.key])
}

// insertLocked adds a new entry as the most recently used.
func (s *Store) insertLocked(e *entry) {
	if e.seg == nil {
		// Packed entries are in no list: their segment's age is theirs.
		s.tick++
		e.used = s.tick
		e.el = s.lru.PushFront(e)
	}
	s.index[e.key] = e
	s.countLocked(e)
}

// countLocked adds e to the store's totals; uncountLocked takes it out.
// A packed entry's bytes are its segment's, counted when it took its slot.
func (s *Store) countLocked(e *entry) {
	if e.seg == nil {
		s.bytes += e.stored
	}
	s.plainBytes += e.size
	if e.zstd {
		s.zstdEntries++
	}
	if e.key.kind == kindAC {
		s.acEntries++
	}
}

func (s *Store) uncountLocked(e *entry) {
	if e.seg == nil {
		s.bytes -= e.stored
	}
	s.plainBytes -= e.size
	if e.zstd {
		s.zstdEntries--
	}
	if e.key.kind == kindAC {
		s.acEntries--
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
		if el != nil && el.Value.(*entry) == keep {
			el = el.Prev()
		}
		seg := s.oldestEvictableLocked()
		if seg != nil && (el == nil || seg.created < el.Value.(*entry).used) {
			s.evictSegmentLocked(seg)
			continue
		}
		if el == nil {
			return
		}
		e := el.Value.(*entry)
		s.removeLocked(e)
		s.evictions++
		s.log.Debug("evicted", "kind", e.key.kind.dir(), "hash", e.key.hash, "size", e.size)
	}
}
