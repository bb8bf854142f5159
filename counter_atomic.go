//go:build race || !(amd64 || arm64 || loong64 || mips64 || mips64le || ppc64 || ppc64le || riscv64 || s390x)

package membuf

import "sync/atomic"

// frontCounter counts a front hit or put exactly, with an atomic add:
// under the race detector (which would report counter_plain.go's plain
// increment, as it should) and where a uint64 is not a machine word (a
// plain 64-bit counter could be read torn there).
type frontCounter struct{ n atomic.Uint64 }

func (c *frontCounter) inc()         { c.n.Add(1) }
func (c *frontCounter) load() uint64 { return c.n.Load() }

// frontCountsExact says whether front counts are exact under concurrency.
const frontCountsExact = true
