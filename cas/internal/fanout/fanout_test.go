package fanout_test

import (
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf/cas/internal/fanout"
)

// Every index is called once, and never more than limit at a time.
func TestEachCallsEveryIndexWithinTheLimit(t *testing.T) {
	for _, limit := range []int{0, 1, 3, 100} {
		var running, most atomic.Int64
		calls := make([]atomic.Int32, 50)
		fanout.Each(len(calls), limit, func(i int) {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			calls[i].Add(1)
			running.Add(-1)
		})
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Fatalf("limit %d: index %d called %d times", limit, i, c)
			}
		}
		if m := most.Load(); m > int64(max(limit, 1)) {
			t.Fatalf("limit %d: %d calls ran at once", limit, m)
		}
	}
}
