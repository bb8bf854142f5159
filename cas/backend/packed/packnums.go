package packed

import (
	"errors"
	"time"
)

// Pack numbers. The table's slots name a pack by a number, its place in
// Backend.packs, so that a slot holds 4 bytes, not a name. A number no
// slot names any more (its records expired, were replaced or found
// gone) is freed by forgetUnusedPacks, so that a node's memory follows
// the records it knows, not every pack it ever learnt of; it is given to
// a new pack only a round later, and at least packQuarantine after, so
// that a read that took a slot's number just before the slot went still
// finds that slot's pack.

// packQuarantine is the least time from a number found unused to its
// reuse.
const packQuarantine = time.Second

// registerPack gives pack a number for the table's slots. The caller
// holds applyMu to read until the records naming it are in the table.
func (b *Backend) registerPack(p packInfo) (uint32, error) {
	b.packsMu.Lock()
	defer b.packsMu.Unlock()
	if n := len(b.freePacks); n > 0 {
		num := b.freePacks[n-1]
		b.freePacks = b.freePacks[:n-1]
		b.packs[num] = p
		return num, nil
	}
	if len(b.packs) >= 1<<32-1 {
		return 0, errors.New("packed: 4 billion packs known")
	}
	b.packs = append(b.packs, p)
	return uint32(len(b.packs) - 1), nil
}

func (b *Backend) pack(n uint32) packInfo {
	b.packsMu.RLock()
	defer b.packsMu.RUnlock()
	return b.packs[n]
}

// forgetUnusedPacks frees the numbers of packs no slot names: those
// found a round ago become free for new packs, those found now follow
// at the next round.
func (b *Backend) forgetUnusedPacks() {
	b.applyMu.Lock() // no pack registered whose records are not in yet
	defer b.applyMu.Unlock()
	b.packsMu.RLock()
	n := len(b.packs)
	b.packsMu.RUnlock()
	if len(b.freeingPacks) > 0 && time.Since(b.freeingSince) < packQuarantine {
		return // a round too soon after the last
	}
	used := b.table.PacksInUse(n)
	b.packsMu.Lock()
	defer b.packsMu.Unlock()
	b.freeingSince = time.Now()
	for _, num := range b.freeingPacks {
		b.packs[num] = packInfo{free: true}
	}
	b.freePacks = append(b.freePacks, b.freeingPacks...)
	b.freeingPacks = b.freeingPacks[:0]
	for num := range n {
		if !used[num] && !b.packs[num].free {
			b.packs[num].free = true
			b.freeingPacks = append(b.freeingPacks, uint32(num))
		}
	}
	// The tail of numbers free for a round is given back.
	for len(b.packs) > 0 && b.packs[len(b.packs)-1] == (packInfo{free: true}) {
		b.packs = b.packs[:len(b.packs)-1]
	}
	b.freePacks = dropFrom(b.freePacks, len(b.packs))
	if cap(b.packs) > 2*len(b.packs)+64 {
		b.packs = append([]packInfo(nil), b.packs...)
	}
}

// dropFrom removes from nums those of at least n.
func dropFrom(nums []uint32, n int) []uint32 {
	kept := nums[:0]
	for _, num := range nums {
		if int(num) < n {
			kept = append(kept, num)
		}
	}
	return kept
}
