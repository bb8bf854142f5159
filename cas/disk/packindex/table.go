package packindex

import (
	"encoding/binary"
	"math/bits"

	"github.com/membuf/membuf/cas/internal/offheap"
)

// Table is the index of packed entries: for each (kind, hash), the
// record holding it (its segment, offset, size and CRC). The zero Table is
// empty and ready; Free gives its memory back. It keeps them as
// fixed-size records in open-addressing tables of bytes, so that the
// garbage collector has nothing to scan in it and, above a page, nothing of
// it on its books at all (mem_unix.go maps its memory outside the Go
// heap): a store of ten million small blobs must not make the collector's
// heap goal, which doubles what is live, grow by gigabytes.
//
// It is split into 256 shards by the first byte of the hash (a SHA-256, so
// spread evenly): a shard grows on its own, so no insertion copies more
// than a 256th of the table. Each shard probes linearly and deletes by
// shifting back the records after the hole, so that it needs no
// tombstones. Not safe for concurrent use: its owner's lock guards it.
type Table struct {
	shards [Shards]shard
	n      int // records held
}

const (
	// Shards is how many shards the table has: records are sharded by
	// their hash's first byte.
	Shards = 256
	// RecordLen is a record's size in the table and in a checkpoint: hash (32), flags (1), segment (4),
	// offset (4), size (4), CRC (4).
	RecordLen = 49
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

// Key is what the table keys a record by: an action result's, or a CAS
// blob's, hash.
type Key struct {
	Hash [32]byte
	AC   bool
}

// Record is one record of the table, decoded: where the data of one packed
// entry is.
type Record struct {
	Hash     [32]byte
	AC       bool   // an action result; else a CAS blob
	Verified bool   // this process has found the blob matching its name
	Seq      uint32 // the segment's number
	Off      uint32 // of the data in the segment
	Size     uint32
	CRC      uint32 // of the data (CRC-32C)
}

type shard struct {
	slots []byte // len is a multiple of RecordLen; from offheap.Bytes
	n     int    // records held
}

func (r *Record) encode(b []byte) {
	copy(b[:32], r.Hash[:])
	flags := byte(recordUsed)
	if r.AC {
		flags |= recordAC
	}
	if r.Verified {
		flags |= recordVerified
	}
	b[32] = flags
	binary.LittleEndian.PutUint32(b[33:], r.Seq)
	binary.LittleEndian.PutUint32(b[37:], r.Off)
	binary.LittleEndian.PutUint32(b[41:], r.Size)
	binary.LittleEndian.PutUint32(b[45:], r.CRC)
}

func decodeRecord(b []byte) Record {
	r := Record{
		AC:       b[32]&recordAC != 0,
		Verified: b[32]&recordVerified != 0,
		Seq:      binary.LittleEndian.Uint32(b[33:]),
		Off:      binary.LittleEndian.Uint32(b[37:]),
		Size:     binary.LittleEndian.Uint32(b[41:]),
		CRC:      binary.LittleEndian.Uint32(b[45:]),
	}
	copy(r.Hash[:], b[:32])
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
func (sh *shard) find(hash *[32]byte, ac bool) int {
	n := len(sh.slots) / RecordLen
	if n == 0 {
		return -1
	}
	want := keyFlags(ac)
	for i := home(hash, n); ; i++ {
		if i == n {
			i = 0
		}
		b := sh.slots[i*RecordLen : (i+1)*RecordLen]
		if b[32] == 0 {
			return -1
		}
		if b[32]&(recordUsed|recordAC) == want && [32]byte(b[:32]) == *hash {
			return i
		}
	}
}

// Get returns the record of (ac, hash).
func (t *Table) Get(hash *[32]byte, ac bool) (Record, bool) {
	sh := &t.shards[hash[0]]
	i := sh.find(hash, ac)
	if i < 0 {
		return Record{}, false
	}
	return decodeRecord(sh.slots[i*RecordLen:]), true
}

// Put adds r, or replaces the record of its key. It reports whether the
// key was new.
func (t *Table) Put(r *Record) bool {
	sh := &t.shards[r.Hash[0]]
	if i := sh.find(&r.Hash, r.AC); i >= 0 {
		r.encode(sh.slots[i*RecordLen:])
		return false
	}
	if n := len(sh.slots) / RecordLen; (sh.n+1)*maxLoadDen > n*maxLoadNum {
		sh.grow(max(minShardSlots, n+n/2))
	}
	sh.insert(r)
	t.n++
	return true
}

// insert places r, whose key sh does not hold, in the first empty slot
// from its home.
func (sh *shard) insert(r *Record) {
	n := len(sh.slots) / RecordLen
	for i := home(&r.Hash, n); ; i++ {
		if i == n {
			i = 0
		}
		if sh.slots[i*RecordLen+32] == 0 {
			r.encode(sh.slots[i*RecordLen:])
			sh.n++
			return
		}
	}
}

// grow moves sh's records into a table of n slots.
func (sh *shard) grow(n int) {
	old := sh.slots
	sh.slots = offheap.Bytes(n*RecordLen, mapAbove)
	sh.n = 0
	for i := 0; i+RecordLen <= len(old); i += RecordLen {
		if old[i+32] != 0 {
			r := decodeRecord(old[i:])
			sh.insert(&r)
		}
	}
	offheap.Release(old, mapAbove)
}

// Delete removes the record of (ac, hash), if any, and reports whether
// there was one.
func (t *Table) Delete(hash *[32]byte, ac bool) bool {
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
func (sh *shard) deleteAt(i int) {
	n := len(sh.slots) / RecordLen
	hole := i
	for j := (i + 1) % n; ; j = (j + 1) % n {
		b := sh.slots[j*RecordLen : (j+1)*RecordLen]
		if b[32] == 0 {
			break
		}
		h := home((*[32]byte)(b[:32]), n)
		// The record at j may move to the hole unless its home lies
		// (cyclically) after the hole and at or before j.
		if (j > hole && (h <= hole || h > j)) || (j < hole && h <= hole && h > j) {
			copy(sh.slots[hole*RecordLen:(hole+1)*RecordLen], b)
			hole = j
		}
	}
	clear(sh.slots[hole*RecordLen : (hole+1)*RecordLen])
	sh.n--
}

// SweepCursor is where a sweep of the table goes on from; the zero value
// is the first slot.
type SweepCursor struct{ shard, slot int }

// Sweep looks at up to n slots from c on, deleting the records whose
// segment live says is gone, and moves c past them: eviction drops a
// segment whole without touching its records, and this takes them out a
// few at a time (each put sweeps some), so no step walks the whole table.
func (t *Table) Sweep(c *SweepCursor, n int, live func(seq uint32) bool) {
	for ; n > 0; n-- {
		sh := &t.shards[c.shard]
		if c.slot >= len(sh.slots)/RecordLen {
			c.shard = (c.shard + 1) % Shards
			c.slot = 0
			continue
		}
		b := sh.slots[c.slot*RecordLen:]
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

// SetVerified marks the record of (ac, hash) as found matching its name.
func (t *Table) SetVerified(hash *[32]byte, ac bool) {
	sh := &t.shards[hash[0]]
	if i := sh.find(hash, ac); i >= 0 {
		sh.slots[i*RecordLen+32] |= recordVerified
	}
}

// Len returns how many records the table holds.
func (t *Table) Len() int { return t.n }

// ShardRecords appends the records of shard i to dst, for a walk in
// bounded steps (the checkpoint, a sweep).
func (t *Table) ShardRecords(i int, dst []Record) []Record {
	sh := &t.shards[i]
	for j := 0; j+RecordLen <= len(sh.slots); j += RecordLen {
		if sh.slots[j+32] != 0 {
			dst = append(dst, decodeRecord(sh.slots[j:]))
		}
	}
	return dst
}

// Reserve makes space for n more records in shard i without growing again
// (loading a checkpoint, which knows each shard's count).
func (t *Table) Reserve(i, n int) {
	sh := &t.shards[i]
	want := (sh.n + n) * maxLoadDen / maxLoadNum
	if want+1 > len(sh.slots)/RecordLen {
		sh.grow(max(minShardSlots, want+1))
	}
}

// Memory returns the bytes the table's slots take.
func (t *Table) Memory() int64 {
	var m int64
	for i := range t.shards {
		m += int64(len(t.shards[i].slots))
	}
	return m
}

// Free releases the table's memory; the table is empty after.
func (t *Table) Free() {
	for i := range t.shards {
		offheap.Release(t.shards[i].slots, mapAbove)
		t.shards[i] = shard{}
	}
	t.n = 0
}
