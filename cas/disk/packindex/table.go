package packindex

import (
	"encoding/binary"
	"math/bits"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/internal/offheap"
)

// Table is the index of packed entries: for each (kind, digest function,
// hash), the record holding it (its segment, offset, size and CRC). The
// zero Table is empty and ready; Free gives its memory back. It keeps them
// as fixed-size records in open-addressing tables of bytes, so that the
// garbage collector has nothing to scan in it and, above a page, nothing of
// it on its books at all (mem_unix.go maps its memory outside the Go
// heap): a store of ten million small blobs must not make the collector's
// heap goal, which doubles what is live, grow by gigabytes.
//
// Records come in two widths: narrow ones for hashes of up to 32 bytes
// (SHA-1, SHA-256, BLAKE3: NarrowRecordLen bytes, what a record cost when
// every key was a SHA-256) and wide ones for longer hashes (SHA-384,
// SHA-512: WideRecordLen bytes), each in shards of its own, so that a
// SHA-256 record pays nothing for the longer hashes. Each width is split
// into 256 shards by the first byte of the hash (spread evenly by any
// digest function): a shard grows on its own, so no insertion copies more
// than a 256th of the table. Each shard probes linearly and deletes by
// shifting back the records after the hole, so that it needs no
// tombstones. Not safe for concurrent use: its owner's lock guards it.
type Table struct {
	shards [Shards]shard
	n      int // records held
}

const (
	// Shards is how many shards the table has: the narrow records' 256,
	// by their hash's first byte, then the wide records' 256.
	Shards = 2 * 256
	// NarrowRecordLen is a narrow record's size in the table and in a
	// checkpoint: hash (32, zeros after a shorter one), flags (1), segment
	// (4), offset (4), size (4), CRC (4).
	NarrowRecordLen = narrowHash + 17
	// WideRecordLen is a wide record's: its hash takes 64 bytes.
	WideRecordLen = wideHash + 17
	narrowHash    = 32
	wideHash      = 64
	// A shard grows by half when it is over maxLoad full: between
	// growths it is 53% to 80% full, so a narrow record costs 61 to 92
	// bytes, a wide one 101 to 152.
	maxLoadNum, maxLoadDen = 4, 5
	minShardSlots          = 16
)

// Flags of a record; a slot whose flags are 0 is empty. The digest
// function takes the bits from fnShift up.
const (
	recordUsed     = 1 << iota
	recordAC       // an action result; else a CAS blob
	recordVerified // this process has found the blob matching its name
	fnShift        = iota
	keyBits        = recordUsed | recordAC | 0x7<<fnShift // what a key is matched on
)

// Key is what the table keys a record by: an action result's, or a CAS
// blob's, digest function and hash (raw, zeros after it).
type Key struct {
	Hash [wideHash]byte
	Fn   cas.Function
	AC   bool
}

// KeyOf returns the key of fn's raw hash h (fn.Size() bytes).
func KeyOf(fn cas.Function, h []byte, ac bool) Key {
	k := Key{Fn: fn, AC: ac}
	copy(k.Hash[:], h)
	return k
}

// ParseKey returns the key of fn's hash in hex; ok is false unless hash is
// fn.HashLen() lowercase hex digits (fn one of cas.Functions).
func ParseKey(fn cas.Function, hash string, ac bool) (k Key, ok bool) {
	k.Fn, k.AC = fn, ac
	if !fn.Valid() {
		return k, false
	}
	return k, cas.DecodeHash(k.Hash[:fn.Size()], hash)
}

// Record is one record of the table, decoded: where the data of one packed
// entry is.
type Record struct {
	Key
	Verified bool   // this process has found the blob matching its name
	Seq      uint32 // the segment's number
	Off      uint32 // of the data in the segment
	Size     uint32
	CRC      uint32 // of the data (CRC-32C)
}

// shardOf is the shard of k: its width's 256, by its hash's first byte.
func shardOf(k *Key) int {
	if k.Fn.Size() > narrowHash {
		return 256 + int(k.Hash[0])
	}
	return int(k.Hash[0])
}

// hashLenOf is the bytes of hash the records of shard i keep.
func hashLenOf(i int) int {
	if i >= 256 {
		return wideHash
	}
	return narrowHash
}

type shard struct {
	slots []byte // len is a multiple of recLen; from offheap.Bytes
	n     int    // records held
	hl    int    // bytes of hash in a record: hashLenOf(the shard's index)
}

func (sh *shard) recLen() int { return sh.hl + 17 }

func (sh *shard) encode(b []byte, r *Record) { encodeRecord(b, r, sh.hl) }

// encodeRecord writes r into b as a record whose hash takes hl bytes.
func encodeRecord(b []byte, r *Record, hl int) {
	copy(b[:hl], r.Hash[:hl])
	flags := byte(recordUsed) | byte(r.Fn)<<fnShift
	if r.AC {
		flags |= recordAC
	}
	if r.Verified {
		flags |= recordVerified
	}
	b[hl] = flags
	binary.LittleEndian.PutUint32(b[hl+1:], r.Seq)
	binary.LittleEndian.PutUint32(b[hl+5:], r.Off)
	binary.LittleEndian.PutUint32(b[hl+9:], r.Size)
	binary.LittleEndian.PutUint32(b[hl+13:], r.CRC)
}

func decodeRecord(b []byte, hl int) Record {
	r := Record{
		Key:      Key{AC: b[hl]&recordAC != 0, Fn: cas.Function(b[hl] >> fnShift)},
		Verified: b[hl]&recordVerified != 0,
		Seq:      binary.LittleEndian.Uint32(b[hl+1:]),
		Off:      binary.LittleEndian.Uint32(b[hl+5:]),
		Size:     binary.LittleEndian.Uint32(b[hl+9:]),
		CRC:      binary.LittleEndian.Uint32(b[hl+13:]),
	}
	copy(r.Hash[:], b[:hl])
	return r
}

// home is the slot a hash probes first in a shard of n slots: the hash's
// bytes after the shard's, scaled to n (n need not be a power of two).
func home(hash []byte, n int) int {
	hi, _ := bits.Mul64(binary.LittleEndian.Uint64(hash[1:9]), uint64(n))
	return int(hi)
}

func keyFlags(k *Key) byte {
	f := byte(recordUsed) | byte(k.Fn)<<fnShift
	if k.AC {
		f |= recordAC
	}
	return f
}

// shard returns shard i, its width set.
func (t *Table) shard(i int) *shard {
	sh := &t.shards[i]
	sh.hl = hashLenOf(i)
	return sh
}

// find returns the slot of k in sh, or -1.
func (sh *shard) find(k *Key) int {
	rl := sh.recLen()
	n := len(sh.slots) / rl
	if n == 0 {
		return -1
	}
	want := keyFlags(k)
	hash := k.Hash[:sh.hl]
	for i := home(hash, n); ; i++ {
		if i == n {
			i = 0
		}
		b := sh.slots[i*rl : (i+1)*rl]
		if b[sh.hl] == 0 {
			return -1
		}
		if b[sh.hl]&keyBits == want && string(b[:sh.hl]) == string(hash) {
			return i
		}
	}
}

// Get returns the record of k.
func (t *Table) Get(k *Key) (Record, bool) {
	sh := t.shard(shardOf(k))
	i := sh.find(k)
	if i < 0 {
		return Record{}, false
	}
	return decodeRecord(sh.slots[i*sh.recLen():], sh.hl), true
}

// Put adds r, or replaces the record of its key. It reports whether the
// key was new.
func (t *Table) Put(r *Record) bool {
	sh := t.shard(shardOf(&r.Key))
	if i := sh.find(&r.Key); i >= 0 {
		sh.encode(sh.slots[i*sh.recLen():], r)
		return false
	}
	if n := len(sh.slots) / sh.recLen(); (sh.n+1)*maxLoadDen > n*maxLoadNum {
		sh.grow(max(minShardSlots, n+n/2))
	}
	sh.insert(r)
	t.n++
	return true
}

// insert places r, whose key sh does not hold, in the first empty slot
// from its home.
func (sh *shard) insert(r *Record) {
	rl := sh.recLen()
	n := len(sh.slots) / rl
	for i := home(r.Hash[:sh.hl], n); ; i++ {
		if i == n {
			i = 0
		}
		if sh.slots[i*rl+sh.hl] == 0 {
			sh.encode(sh.slots[i*rl:], r)
			sh.n++
			return
		}
	}
}

// grow moves sh's records into a table of n slots.
func (sh *shard) grow(n int) {
	old, rl := sh.slots, sh.recLen()
	sh.slots = offheap.Bytes(n*rl, mapAbove)
	sh.n = 0
	for i := 0; i+rl <= len(old); i += rl {
		if old[i+sh.hl] != 0 {
			r := decodeRecord(old[i:], sh.hl)
			sh.insert(&r)
		}
	}
	offheap.Release(old, mapAbove)
}

// Delete removes the record of k, if any, and reports whether there was
// one.
func (t *Table) Delete(k *Key) bool {
	sh := t.shard(shardOf(k))
	i := sh.find(k)
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
	rl := sh.recLen()
	n := len(sh.slots) / rl
	hole := i
	for j := (i + 1) % n; ; j = (j + 1) % n {
		b := sh.slots[j*rl : (j+1)*rl]
		if b[sh.hl] == 0 {
			break
		}
		h := home(b[:sh.hl], n)
		// The record at j may move to the hole unless its home lies
		// (cyclically) after the hole and at or before j.
		if (j > hole && (h <= hole || h > j)) || (j < hole && h <= hole && h > j) {
			copy(sh.slots[hole*rl:(hole+1)*rl], b)
			hole = j
		}
	}
	clear(sh.slots[hole*rl : (hole+1)*rl])
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
		sh := t.shard(c.shard)
		if c.slot >= len(sh.slots)/sh.recLen() {
			c.shard = (c.shard + 1) % Shards
			c.slot = 0
			continue
		}
		b := sh.slots[c.slot*sh.recLen():]
		if b[sh.hl] != 0 && !live(binary.LittleEndian.Uint32(b[sh.hl+1:])) {
			// The record shifted back into this slot, if any, is looked
			// at next.
			sh.deleteAt(c.slot)
			t.n--
			continue
		}
		c.slot++
	}
}

// SetVerified marks the record of k as found matching its name.
func (t *Table) SetVerified(k *Key) {
	sh := t.shard(shardOf(k))
	if i := sh.find(k); i >= 0 {
		sh.slots[i*sh.recLen()+sh.hl] |= recordVerified
	}
}

// Len returns how many records the table holds.
func (t *Table) Len() int { return t.n }

// ShardRecords appends the records of shard i to dst, for a walk in
// bounded steps (the checkpoint, a sweep).
func (t *Table) ShardRecords(i int, dst []Record) []Record {
	sh := t.shard(i)
	rl := sh.recLen()
	for j := 0; j+rl <= len(sh.slots); j += rl {
		if sh.slots[j+sh.hl] != 0 {
			dst = append(dst, decodeRecord(sh.slots[j:], sh.hl))
		}
	}
	return dst
}

// Reserve makes space for n more records in shard i without growing again
// (loading a checkpoint, which knows each shard's count).
func (t *Table) Reserve(i, n int) {
	sh := t.shard(i)
	want := (sh.n + n) * maxLoadDen / maxLoadNum
	if want+1 > len(sh.slots)/sh.recLen() {
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
