package report

import (
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: each power of two is split into
// 1<<subBits buckets, so a value is known to within 1/16 (about 6%).
const subBits = 4

// nBuckets is one more than the bucket of the largest int64.
const nBuckets = (64 - subBits) << subBits

// Histogram counts latencies in log-linear buckets. Recording allocates
// nothing and takes a few nanoseconds, so each worker keeps its own and they
// are merged at the end. The zero value is empty and ready.
type Histogram struct {
	counts [nBuckets]uint64
	n      uint64
	max    int64
}

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1
	m := int(v>>(e-subBits)) & (1<<subBits - 1)
	return (e-subBits+1)<<subBits | m
}

// bucketLow is the least value in bucket i.
func bucketLow(i int) int64 {
	if i < 1<<subBits {
		return int64(i)
	}
	e := i>>subBits + subBits - 1
	m := int64(i & (1<<subBits - 1))
	return 1<<e | m<<(e-subBits)
}

// Record adds one observation.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.n++
	h.max = max(h.max, v)
}

// Merge adds every observation of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// Count is the number of observations.
func (h *Histogram) Count() uint64 { return h.n }

// Quantile returns the latency at or below which a share q (0 to 1) of the
// observations fall: the middle of the bucket holding it, never more than
// the largest observation. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			if i == nBuckets-1 {
				return time.Duration(h.max)
			}
			lo, hi := bucketLow(i), bucketLow(i+1)
			return time.Duration(min(lo+(hi-lo)/2, h.max))
		}
	}
	return time.Duration(h.max)
}

// Max is the largest observation.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }
