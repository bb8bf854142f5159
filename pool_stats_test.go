package membuf_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/membuf/membuf"
)

// checkCallsCounted checks that stats counted calls Gets and as many Puts,
// made concurrently: exactly if exact (the race detector's build, or
// debug mode, which never uses the front), else never more, and short
// only by what concurrent plain increments can lose (Pool.Stats): a few
// in a thousand at most, a twentieth allowed here for a loaded machine.
func checkCallsCounted(t *testing.T, tot membuf.ClassStats, calls uint64, exact bool) {
	t.Helper()
	low := calls
	if !exact {
		low = calls - calls/20
	}
	for _, c := range []struct {
		name    string
		counted uint64
	}{{"gets", tot.Gets}, {"puts", tot.Puts}} {
		if c.counted > calls || c.counted < low {
			t.Errorf("%d %s counted, %d made (exact: %v)", c.counted, c.name, calls, exact)
		}
	}
}

// TestStatsNeverDecrease: snapshots taken while goroutines Get and Put
// never report fewer Gets, Hits or Puts than an earlier one did, in any
// class, though a lost front increment can take a stripe's count back
// (Pool.Stats): membuf serve exports them as Prometheus counters.
func TestStatsNeverDecrease(t *testing.T) {
	membuf.SetDebugEnv(t, false) // the front is what counts without a lock
	p := newPool(t, membuf.Config{MaxSize: 64 << 10})
	var stop atomic.Bool
	var wg, started sync.WaitGroup
	for g := range 4 {
		started.Add(1)
		wg.Go(func() {
			sizes := []int{512, 4096, 4096 + g}
			for i := 0; !stop.Load(); i++ {
				p.Put(p.Get(sizes[i%len(sizes)]))
				if i == 1000 {
					started.Done() // the snapshots below run while all four do
				}
			}
		})
	}
	started.Wait()
	prev := p.Stats()
	for range 200 {
		st := p.Stats()
		for i, c := range st.Classes {
			was := prev.Classes[i]
			if c.Gets < was.Gets || c.Hits < was.Hits || c.Puts < was.Puts {
				t.Errorf("class %d: gets %d, hits %d, puts %d after %d, %d, %d", c.Size, c.Gets, c.Hits, c.Puts, was.Gets, was.Hits, was.Puts)
			}
		}
		prev = st
	}
	stop.Store(true)
	wg.Wait()
	if prev.Total().Gets == 0 {
		t.Fatal("no Gets counted: the workload did not run")
	}
}
