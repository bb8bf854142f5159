package membuf

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// poolCounts holds the counts of what a pool does without a lock (front
// hits and puts, misses, drops) per class, in stripes. An operation adds to
// the stripe its buffer's pointer hashes to. A buffer mostly cycles through
// one P's part of the front, so each P mostly writes its own stripes and
// concurrent Gets and Puts of one class do not pass a cache line back and
// forth, as one counter per class would, and as a random stripe per
// operation would too (math/rand/v2's generator, ChaCha8, also took a
// quarter of a whole Get+Put in a profile). The front's two counts are
// frontCounters, a plain increment each (no locked instruction on the
// fast path): two Ps that hit one stripe at the same instant may lose an
// increment. Misses and drops, on slow paths, are atomic and exact. Stats
// sums the stripes. What happens under a shard lock is counted there (see
// freeList).
type poolCounts struct {
	c         []classCounts // stripe s, class i at s<<strideLog+i
	strideLog uint          // log2 of the entries per stripe
	shift     uint          // 64 - log2(stripes)
}

type classCounts struct {
	frontHits, frontPuts frontCounter
	misses, drops        atomic.Uint64
}

// newPoolCounts makes counts for classes classes (oversize included) in a
// power-of-two number of stripes: 8 per P, between 8 and 64, so that two
// Ps' buffers seldom hash to one stripe.
func newPoolCounts(classes, procs int) poolCounts {
	n := 8
	for n < 8*procs && n < 64 {
		n <<= 1
	}
	// Each stripe has a power of two entries, at least two (64 bytes) more
	// than there are classes, so that the last class of one stripe and the
	// first of the next never share a line, and finding a stripe is a
	// shift, not a multiply.
	strideLog := uint(bits.Len(uint(classes + 1)))
	return poolCounts{
		c:         make([]classCounts, n<<strideLog),
		strideLog: strideLog,
		shift:     uint(64 - bits.TrailingZeros(uint(n))),
	}
}

// of returns class i's counts in the stripe of buffer b. The pointer is
// only hashed (Fibonacci hashing: the top bits of a multiply), never turned
// back into one.
func (k *poolCounts) of(i int, b *[]byte) *classCounts {
	h := uint64(uintptr(unsafe.Pointer(b))) * 0x9e3779b97f4a7c15
	// The masks tell the compiler the shifts are below 64 (they are), so
	// that it emits bare shifts: this runs on every Get and Put.
	return &k.c[int(h>>(k.shift&63))<<(k.strideLog&63)+i]
}

// sum adds up class i's counts over the stripes. A sum taken while other
// goroutines Get and Put may miss the operations that complete while it
// reads; the front's counts may also lag by increments lost (frontCounter).
func (k *poolCounts) sum(i int) (frontHits, frontPuts, misses, drops uint64) {
	for s := 0; s<<k.strideLog < len(k.c); s++ {
		c := &k.c[s<<k.strideLog+i]
		frontHits += c.frontHits.load()
		frontPuts += c.frontPuts.load()
		misses += c.misses.Load()
		drops += c.drops.Load()
	}
	return
}
