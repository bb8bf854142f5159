package membuf

import "math/bits"

// classTable maps sizes to size classes and back in O(1), with bit
// arithmetic and no loop over classes.
//
// With k = 2^shift classes per doubling, the classes in [2^e, 2^(e+1)) are
// (k+j) << (e-shift) for j in [0, k): 256, 320, 384, 448, 512, ... for k = 4.
// Every class has a global index L = ((e-shift) << shift) + j, so that
// size(L) = (k + L&(k-1)) << (L >> shift); the pool's class i is global
// index base+i, where base is the index of MinSize. MinSize >= 16 >= 2k
// keeps every shift non-negative.
type classTable struct {
	shift   uint // log2 of classes per doubling
	k       int  // classes per doubling
	base    int  // global index of MinSize
	minSize int
	maxSize int
	n       int // number of classes, MinSize and MaxSize included

	// getOff and putOff are the constant terms of getIndex and putIndex
	// (see there), folded once so that Get and Put load one field for
	// them, not three.
	getOff, putOff int
}

func newClassTable(shift uint, minSize, maxSize int) classTable {
	t := classTable{shift: shift, k: 1 << shift, minSize: minSize, maxSize: maxSize}
	t.base = t.globalFloor(minSize)
	t.n = t.globalFloor(maxSize) - t.base + 1
	t.putOff = -int(shift<<shift) - t.k - t.base
	t.getOff = t.putOff + 1
	return t
}

// getIndex returns the pool class of the smallest class that holds n bytes,
// for 0 < n <= maxSize.
func (t *classTable) getIndex(n int) int {
	if n <= t.minSize {
		return 0
	}
	m := uint(n - 1)
	e := uint(bits.Len(m)) - 1
	// Shift counts are below 64 (e < 64, shift <= 3); the masks say so to
	// the compiler, which then emits a bare shift (Get and Put run this).
	q := int(m >> ((e - t.shift) & 63)) // in [k, 2k): m's top shift+1 bits
	// ((e-shift) << shift) + q + 1 - k - base, with the constant terms
	// folded into getOff.
	return int(e<<(t.shift&63)) + q + t.getOff
}

// putIndex returns the pool class of the largest class whose size is at most
// c, for minSize <= c <= maxSize: the class a buffer of capacity c fills.
func (t *classTable) putIndex(c int) int {
	// globalFloor(c) - base, with the constant terms folded into putOff.
	e := uint(bits.Len(uint(c))) - 1
	q := int(uint(c) >> ((e - t.shift) & 63))
	return int(e<<(t.shift&63)) + q + t.putOff
}

func (t *classTable) globalFloor(c int) int {
	e := uint(bits.Len(uint(c))) - 1
	q := int(uint(c) >> ((e - t.shift) & 63))
	return int((e-t.shift)<<(t.shift&63)) + q - t.k
}

// size returns the size of pool class i.
func (t *classTable) size(i int) int {
	L := i + t.base
	return (t.k + L&(t.k-1)) << (L >> t.shift)
}
