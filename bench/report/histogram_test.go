package report

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	var all []time.Duration
	for i := 1; i <= 10000; i++ {
		d := time.Duration(i) * time.Microsecond
		h.Record(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := all[int(q*float64(len(all)))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 1.0/16 {
			t.Errorf("Quantile(%v) = %v, exact %v: off by %.1f%%, more than a bucket", q, got, exact, rel*100)
		}
	}
	if h.Max() != all[len(all)-1] || h.Count() != 10000 {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
}

func TestHistogramBuckets(t *testing.T) {
	// Every value falls in a bucket whose range holds it, and the buckets
	// are contiguous and increasing.
	for _, v := range []int64{0, 1, 15, 16, 17, 31, 32, 33, 1000, 1 << 20, 1<<40 + 12345, math.MaxInt64} {
		i := bucketOf(v)
		if lo := bucketLow(i); lo > v || (i+1 < nBuckets && bucketLow(i+1) <= v) {
			t.Errorf("value %d in bucket %d = [%d, %d)", v, i, lo, bucketLow(i+1))
		}
	}
	if got := bucketOf(math.MaxInt64); got != nBuckets-1 {
		t.Errorf("the largest value is in bucket %d, want the last, %d", got, nBuckets-1)
	}
	for i := 1; i < nBuckets; i++ {
		if bucketLow(i) <= bucketLow(i-1) {
			t.Fatalf("bucket %d starts at %d, not after bucket %d at %d", i, bucketLow(i), i-1, bucketLow(i-1))
		}
	}
	var a, b Histogram
	a.Record(time.Millisecond)
	b.Record(time.Second)
	a.Merge(&b)
	if a.Count() != 2 || a.Max() != time.Second {
		t.Errorf("merged: count %d max %v", a.Count(), a.Max())
	}
	if q := a.Quantile(0.5); q < time.Millisecond*15/16 || q > time.Millisecond*17/16 {
		t.Errorf("merged: median %v, want about 1ms", q)
	}
	if q := a.Quantile(1); q < time.Second*15/16 || q > time.Second {
		t.Errorf("merged: Quantile(1) = %v, want about 1s and at most the max", q)
	}
}
