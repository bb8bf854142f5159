//go:build !race && (amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package membuf

// frontCounter counts a front hit or put without a locked instruction: a
// plain increment, which is all that the fast path can afford (a LOCK XADD
// on amd64 waits for every earlier store, a Get's clearing included; see
// docs/pool.md, "Statistics"). Two goroutines that increment one counter
// at the same instant may lose one of the two increments: the count never
// runs ahead of the calls, and lags them by the increments so lost. The
// Go memory model makes a racy access of a machine word observe some
// write of it, so a count read while others write is one that the counter
// held, never a torn value: this file is built only where a uint64 is a
// machine word. Under the race detector, which would rightly report the
// plain increment, counter_atomic.go counts exactly instead.
type frontCounter struct{ n uint64 }

func (c *frontCounter) inc()         { c.n++ }
func (c *frontCounter) load() uint64 { return c.n }

// frontCountsExact says whether front counts are exact under concurrency.
const frontCountsExact = false
