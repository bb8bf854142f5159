package disk

import (
	"encoding/binary"
	"math/bits"
)

// recordTable is the index of packed entries: for each (kind, hash), the
// record holding it (its segment, offset, size and CRC). It keeps them as
// fixed-size records in open-addressing tables of bytes, so that the
// garbage collector has nothing to scan in it and, above a page, nothing of
// it on its books at all (recordmem_unix.go maps its memory outside the Go
// heap): a store of ten million small blobs must not make the collector's
// heap goal, which doubles what is live, grow by gigabytes.
//
// It is split into 256 shards by the first byte of the hash (a SHA-256, so
// spread evenly): a shard grows on its own, so no insertion copies more
// than a 256th of the table. Each shard probes linearly and deletes by
// shifting back the records after the hole, so that it needs no
// tombstones. Not safe for concurrent use: Store.mu guards it.
type recordTable struct {
	shards [tableShards]recordShard
	n      int // records held
}

const (
	tableShards = 256
	// recordLen is a record's size: hash (32), flags (1), segment (4),
	// offset (4), size (4), CRC (4).
	recordLen = 49
	// A shard grows by half when it is over maxLoad full: between
	// growths it is 53% to 80% full, so a record costs 61 to 92 bytes.
	maxLoadNum, maxLoadDen = 4, 5
	minShardSlots          = 16
)

// Flags of a record; a slot whose flags are 0 is empty.
const (
	recordUsed     = 1 << iota
	recordAC       // an action result; else a CAS blob
	recordVerified // this process has found the blob matching its name
)

// tableKey is what the table keys a record by.
type tableKey struct {
	hash [32]byte
	ac   bool
}

// packedRecord is one record of the table, decoded.
type packedRecord struct {
	hash     [32]byte
	ac       bool
	verified bool
	seq      uint32 // the segment's
	off      uint32 // of the data in the segment
	size     uint32
	crc      uint32
}

type recordShard struct {
	slots []byte // len is a multiple of recordLen; from allocRecords
	n     int    // records held
}

func (r *packedRecord) encode(b []byte) {
	copy(b[:32], r.hash[:])
	flags := byte(recordUsed)
	if r.ac {
		flags |= recordAC
	}
	if r.verified {
		flags |= recordVerified
	}
	b[32] = flags
	binary.LittleEndian.PutUint32(b[33:], r.seq)
	binary.LittleEndian.PutUint32(b[37:], r.off)
	binary.LittleEndian.PutUint32(b[41:], r.size)
	binary.LittleEndian.PutUint32(b[45:], r.crc)
}

func decodeRecord(b []byte) packedRecord {
	r := packedRecord{
		ac:       b[32]&recordAC != 0,
		verified: b[32]&recordVerified != 0,
		seq:      binary.LittleEndian.Uint32(b[33:]),
		off:      binary.LittleEndian.Uint32(b[37:]),
		size:     binary.LittleEndian.Uint32(b[41:]),
		crc:      binary.LittleEndian.Uint32(b[45:]),
	}
	copy(r.hash[:], b[:32])
	return r
}

// home is the slot a hash probes first in a shard of n slots: the hash's
// bytes after the shard's, scaled to n (n need not be a power of two).
func home(hash *[32]byte, n int) int {
	hi, _ := bits.Mul64(binary.LittleEndian.Uint64(hash[1:9]), uint64(n))
	return int(hi)
}

func keyFlags(ac bool) byte {
	if ac {
		return recordUsed | recordAC
	}
	return recordUsed
}

// find returns the slot of (ac, hash) in sh, or -1.
func (sh *recordShard) find(hash *[32]byte, ac bool) int {
	n := len(sh.slots) / recordLen
	if n == 0 {
		return -1
	}
	want := keyFlags(ac)
	for i := home(hash, n); ; i++ {
		if i == n {
			i = 0
		}
		b := sh.slots[i*recordLen : (i+1)*recordLen]
		if b[32] == 0 {
			return -1
		}
		if b[32]&(recordUsed|recordAC) == want && [32]byte(b[:32]) == *hash {
			return i
		}
	}
}

// get returns the record of (ac, hash).
func (t *recordTable) get(hash *[32]byte, ac bool) (packedRecord, bool) {
	sh := &t.shards[hash[0]]
	i := sh.find(hash, ac)
	if i < 0 {
		return packedRecord{}, false
	}
	return decodeRecord(sh.slots[i*recordLen:]), true
}

// put adds r, or replaces the record of its key. It reports whether the
// key was new.
func (t *recordTable) put(r *packedRecord) bool {
	sh := &t.shards[r.hash[0]]
	if i := sh.find(&r.hash, r.ac); i >= 0 {
		r.encode(sh.slots[i*recordLen:])
		return false
	}
	if n := len(sh.slots) / recordLen; (sh.n+1)*maxLoadDen > n*maxLoadNum {
		sh.grow(max(minShardSlots, n+n/2))
	}
	sh.insert(r)
	t.n++
	return true
}

// insert places r, whose key sh does not hold, in the first empty slot
// from its home.
func (sh *recordShard) insert(r *packedRecord) {
	n := len(sh.slots) / recordLen
	for i := home(&r.hash, n); ; i++ {
		if i == n {
			i = 0
		}
		if sh.slots[i*recordLen+32] == 0 {
			r.encode(sh.slots[i*recordLen:])
			sh.n++
			return
		}
	}
}

// grow moves sh's records into a table of n slots.
func (sh *recordShard) grow(n int) {
	old := sh.slots
	sh.slots = allocRecords(n * recordLen)
	sh.n = 0
	for i := 0; i+recordLen <= len(old); i += recordLen {
		if old[i+32] != 0 {
			r := decodeRecord(old[i:])
			sh.insert(&r)
		}
	}
	freeRecords(old)
}

// delete removes the record of (ac, hash), if any, and reports whether
// there was one.
func (t *recordTable) delete(hash *[32]byte, ac bool) bool {
	sh := &t.shards[hash[0]]
	i := sh.find(hash, ac)
	if i < 0 {
		return false
	}
	sh.deleteAt(i)
	t.n--
	return true
}

// deleteAt empties slot i and shifts back the records after it that
// probed past it (backward-shift deletion), so that every record stays
// reachable from its home without tombstones.
func (sh *recordShard) deleteAt(i int) {
	n := len(sh.slots) / recordLen
	hole := i
	for j := (i + 1) % n; ; j = (j + 1) % n {
		b := sh.slots[j*recordLen : (j+1)*recordLen]
		if b[32] == 0 {
			break
		}
		h := home((*[32]byte)(b[:32]), n)
		// The record at j may move to the hole unless its home lies
		// (cyclically) after the hole and at or before j.
		if (j > hole && (h <= hole || h > j)) || (j < hole && h <= hole && h > j) {
			copy(sh.slots[hole*recordLen:(hole+1)*recordLen], b)
			hole = j
		}
	}
	clear(sh.slots[hole*recordLen : (hole+1)*recordLen])
	sh.n--
}

// sweepCursor is where a sweep of the table goes on from.
type sweepCursor struct{ shard, slot int }

// sweep looks at up to n slots from c on, deleting the records whose
// segment live says is gone, and moves c past them: eviction drops a
// segment whole without touching its records, and this takes them out a
// few at a time (each put sweeps some), so no step walks the whole table.
func (t *recordTable) sweep(c *sweepCursor, n int, live func(seq uint32) bool) {
	for ; n > 0; n-- {
		sh := &t.shards[c.shard]
		if c.slot >= len(sh.slots)/recordLen {
			c.shard = (c.shard + 1) % tableShards
			c.slot = 0
			continue
		}
		b := sh.slots[c.slot*recordLen:]
		if b[32] != 0 && !live(binary.LittleEndian.Uint32(b[33:])) {
			// The record shifted back into this slot, if any, is looked
			// at next.
			sh.deleteAt(c.slot)
			t.n--
			continue
		}
		c.slot++
	}
}

// setVerified marks the record of (ac, hash) as found matching its name.
func (t *recordTable) setVerified(hash *[32]byte, ac bool) {
	sh := &t.shards[hash[0]]
	if i := sh.find(hash, ac); i >= 0 {
		sh.slots[i*recordLen+32] |= recordVerified
	}
}

// len returns how many records the table holds.
func (t *recordTable) len() int { return t.n }

// shardRecords appends the records of shard i to dst, for a walk in
// bounded steps (the checkpoint, a sweep).
func (t *recordTable) shardRecords(i int, dst []packedRecord) []packedRecord {
	sh := &t.shards[i]
	for j := 0; j+recordLen <= len(sh.slots); j += recordLen {
		if sh.slots[j+32] != 0 {
			dst = append(dst, decodeRecord(sh.slots[j:]))
		}
	}
	return dst
}

// reserve makes room for n more records in shard i without growing again
// (loading a checkpoint, which knows each shard's count).
func (t *recordTable) reserve(i, n int) {
	sh := &t.shards[i]
	want := (sh.n + n) * maxLoadDen / maxLoadNum
	if want+1 > len(sh.slots)/recordLen {
		sh.grow(max(minShardSlots, want+1))
	}
}

// memory returns the bytes the table's slots take.
func (t *recordTable) memory() int64 {
	var m int64
	for i := range t.shards {
		m += int64(len(t.shards[i].slots))
	}
	return m
}

// free releases the table's memory; the table is empty after.
func (t *recordTable) free() {
	for i := range t.shards {
		freeRecords(t.shards[i].slots)
		t.shards[i] = recordShard{}
	}
	t.n = 0
}
