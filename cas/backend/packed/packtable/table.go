// Package packtable is the table of a packed bucket's records on a node:
// for each entry an index names, where its bytes are (a pack's number and
// an offset, or an object of its own) and its size, in pointer-free slots
// off the Go heap. It knows nothing of packs but their numbers, which its
// owner gives (cas/backend/packed). Imports cas/internal/offheap only.
package packtable

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync"

	"github.com/membuf/membuf/cas/internal/offheap"
)

// Table is every entry this node knows the bucket's indexes name: where
// its bytes are (a pack and an offset, or an object of its own) and its
// size. Ten million entries must fit in well under a gigabyte on every
// node, and the garbage collector must not scan them: the records are
// fixed-size slots in byte slices, no pointers, open addressing with
// linear probing; a shard's slots past 64 KiB are mapped outside the Go
// heap (cas/internal/offheap), so that they count neither towards the collector's
// goal (which would let the heap grow to twice them) nor as its garbage
// when a shard grows.
//
// It is split into tableShards shards, each growing on its own by a
// quarter when it is 80% full: a Table that doubled as a whole would hold
// 2x its records' bytes just after doubling; shards that grow by a
// quarter keep every shard between 64% and 80% full (60-75 bytes a
// record), and only one shard's slots are copied at a time. Where a key
// lands is a maphash of it with a seed of this process: action keys are
// chosen by clients, who must not be able to pile them into one run.
type Table struct {
	seed   maphash.Seed
	shards [tableShards]tableShard
}

const tableShards = 256

// Slot layout, slotBytes each:
//
//	[0:32]  the key's SHA-256
//	[32:38] the entry's size, little-endian (48 bits)
//	[38]    slotUsed | slotAC | slotObject | slotDead
//	[39]    unused
//	[40:44] the pack's number (packRef), little-endian
//	[44:48] the record's offset in the pack, little-endian
const (
	slotBytes  = 48
	slotUsed   = 1 << 0
	slotAC     = 1 << 1
	slotObject = 1 << 2 // an object of its own, not in a pack
	slotDead   = 1 << 3 // read and found missing: absent until put again
)

// MaxSize is the largest entry size a slot holds; MaxPackOffset the
// largest offset.
const (
	MaxSize       = 1<<48 - 1
	MaxPackOffset = 1<<32 - 1
)

// tableShard is one shard: its slots and how many are used.
type tableShard struct {
	mu    sync.RWMutex
	slots []byte
	used  int
}

// Location is where an entry's bytes are.
type Location struct {
	Size   int64
	Object bool // an object of its own; pack and offset unused
	Pack   uint32
	Offset uint32
}

func New() *Table { return &Table{seed: maphash.MakeSeed()} }

// place returns k's shard and the slot its probe starts at, given the
// shard's capacity in slots.
func (t *Table) place(hash *[32]byte, ac bool) (*tableShard, uint64) {
	h := maphash.Bytes(t.seed, hash[:])
	if ac {
		h = bits.RotateLeft64(h, 17) ^ 0x9e3779b97f4a7c15
	}
	return &t.shards[h>>56], h
}

// start maps h onto [0, n) (Lemire's multiply-shift: no power-of-two
// capacity needed).
func start(h uint64, n int) int {
	hi, _ := bits.Mul64(h<<8, uint64(n))
	return int(hi)
}

// find returns the index of k's slot in s, or of the empty slot where it
// would go; s.slots is not empty. The caller holds s.mu.
func (s *tableShard) find(h uint64, hash *[32]byte, ac bool) (int, bool) {
	n := len(s.slots) / slotBytes
	for i := start(h, n); ; i = (i + 1) % n {
		slot := s.slots[i*slotBytes : (i+1)*slotBytes]
		flags := slot[38]
		if flags&slotUsed == 0 {
			return i, false
		}
		if (flags&slotAC != 0) == ac && [32]byte(slot[:32]) == *hash {
			return i, true
		}
	}
}

// Get returns where k's bytes are, if the table knows and they have not
// been found missing.
func (t *Table) Get(hash *[32]byte, ac bool) (Location, bool) {
	s, h := t.place(hash, ac)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.used == 0 {
		return Location{}, false
	}
	i, ok := s.find(h, hash, ac)
	if !ok {
		return Location{}, false
	}
	slot := s.slots[i*slotBytes : (i+1)*slotBytes]
	if slot[38]&slotDead != 0 {
		return Location{}, false
	}
	return slotLocation(slot), true
}

// slotLocation decodes a used slot's location.
func slotLocation(slot []byte) Location {
	return Location{
		Size:   int64(binary.LittleEndian.Uint64(slot[32:40]) & MaxSize),
		Object: slot[38]&slotObject != 0,
		Pack:   binary.LittleEndian.Uint32(slot[40:44]),
		Offset: binary.LittleEndian.Uint32(slot[44:48]),
	}
}

// Put records where k's bytes are, replacing what was known of k: a
// later record of the same entry is as good, and one Put after a read
// found the earlier missing is better.
func (t *Table) Put(hash *[32]byte, ac bool, loc Location) {
	s, h := t.place(hash, ac)
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.used+1)*5 > len(s.slots)/slotBytes*4 {
		s.grow(t)
	}
	i, found := s.find(h, hash, ac)
	slot := s.slots[i*slotBytes : (i+1)*slotBytes]
	if !found {
		s.used++
		copy(slot[:32], hash[:])
	}
	flags := byte(slotUsed)
	if ac {
		flags |= slotAC
	}
	if loc.Object {
		flags |= slotObject
	}
	binary.LittleEndian.PutUint64(slot[32:40], uint64(loc.Size)&MaxSize)
	slot[38], slot[39] = flags, 0
	binary.LittleEndian.PutUint32(slot[40:44], loc.Pack)
	binary.LittleEndian.PutUint32(slot[44:48], loc.Offset)
}

// MarkDead records that k's bytes were found missing where the table
// said, if it still says so (a put meanwhile moved it): absent until it
// is put again.
func (t *Table) MarkDead(hash *[32]byte, ac bool, at Location) {
	s, h := t.place(hash, ac)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == 0 {
		return
	}
	i, ok := s.find(h, hash, ac)
	if !ok {
		return
	}
	slot := s.slots[i*slotBytes : (i+1)*slotBytes]
	if binary.LittleEndian.Uint32(slot[40:44]) == at.Pack && binary.LittleEndian.Uint32(slot[44:48]) == at.Offset && (slot[38]&slotObject != 0) == at.Object {
		slot[38] |= slotDead
	}
}

// grow makes s a quarter larger (at least 64 slots) and moves its
// records there. The caller holds s.mu.
func (s *tableShard) grow(t *Table) {
	old := s.slots
	n := max(64, len(old)/slotBytes*5/4)
	s.slots = offheap.Bytes(n*slotBytes, mapAbove)
	defer offheap.Release(old, mapAbove)
	for i := 0; i < len(old); i += slotBytes {
		if slot := old[i : i+slotBytes]; slot[38]&slotUsed != 0 {
			s.insert(t, slot)
		}
	}
}

// insert copies a used slot from elsewhere into s, whose slots have space
// and do not hold its key. The caller holds s.mu.
func (s *tableShard) insert(t *Table, slot []byte) {
	hash := (*[32]byte)(slot[:32])
	_, h := t.place(hash, slot[38]&slotAC != 0)
	j, _ := s.find(h, hash, slot[38]&slotAC != 0)
	copy(s.slots[j*slotBytes:], slot)
}

// Forget removes the records drop says to, and those marked dead, and
// returns how many it removed. Linear probing has no cheap delete (a
// hole would cut the probe of a key placed past it), so a shard with
// records to remove is rebuilt from those it keeps, at 70% full, one
// shard at a time: the memory of a quarter of a shard's records, never
// the table's.
func (t *Table) Forget(drop func(Location) bool) int64 {
	var removed int64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		removed += int64(s.forget(t, drop))
		s.mu.Unlock()
	}
	return removed
}

func (s *tableShard) forget(t *Table, drop func(Location) bool) int {
	gone := func(slot []byte) bool {
		return slot[38]&slotDead != 0 || drop(slotLocation(slot))
	}
	n := 0
	for i := 0; i < len(s.slots); i += slotBytes {
		if slot := s.slots[i : i+slotBytes]; slot[38]&slotUsed != 0 && gone(slot) {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	old := s.slots
	defer offheap.Release(old, mapAbove)
	s.used -= n
	s.slots = nil
	if s.used > 0 {
		s.slots = offheap.Bytes(max(64, s.used*10/7+1)*slotBytes, mapAbove)
	}
	for i := 0; i < len(old); i += slotBytes {
		if slot := old[i : i+slotBytes]; slot[38]&slotUsed != 0 && !gone(slot) {
			s.insert(t, slot)
		}
	}
	return n
}

// Release returns the slots' memory (mapped outside the Go heap: the
// collector would not free it): the table is empty after.
func (t *Table) Release() {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		offheap.Release(s.slots, mapAbove)
		s.slots, s.used = nil, 0
		s.mu.Unlock()
	}
}

// Stats returns the records the table holds and the bytes of its slots.
func (t *Table) Stats() (records, bytes int64) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		records += int64(s.used)
		bytes += int64(len(s.slots))
		s.mu.RUnlock()
	}
	return records, bytes
}

// PacksInUse reports, for each pack number below n, whether a slot names
// it.
func (t *Table) PacksInUse(n int) []bool {
	used := make([]bool, n)
	t.Each(func(_ *[32]byte, _ bool, loc Location) {
		if !loc.Object && int(loc.Pack) < n {
			used[loc.Pack] = true
		}
	}, nil)
	return used
}

// Each calls fn on every record that is not dead, a shard at a time,
// holding that shard to read (fn must not call the table), and after
// Each shard, holding none, between (if not nil); it returns between's
// first error, having stopped there.
func (t *Table) Each(fn func(hash *[32]byte, ac bool, loc Location), between func() error) error {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for j := 0; j < len(s.slots); j += slotBytes {
			if slot := s.slots[j : j+slotBytes]; slot[38]&slotUsed != 0 && slot[38]&slotDead == 0 {
				fn((*[32]byte)(slot[:32]), slot[38]&slotAC != 0, slotLocation(slot))
			}
		}
		s.mu.RUnlock()
		if between != nil {
			if err := between(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Reserve grows the table to hold about n more records, spread over the
// shards, so that loading them does not grow each shard many times.
func (t *Table) Reserve(n int64) {
	per := int(n/tableShards) + 1
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		if want := (s.used+per)*10/7 + 1; len(s.slots)/slotBytes < want {
			old := s.slots
			s.slots = offheap.Bytes(want*slotBytes, mapAbove)
			for j := 0; j < len(old); j += slotBytes {
				if slot := old[j : j+slotBytes]; slot[38]&slotUsed != 0 {
					s.insert(t, slot)
				}
			}
			offheap.Release(old, mapAbove)
		}
		s.mu.Unlock()
	}
}
