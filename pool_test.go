package membuf_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/membuf/membuf"
)

func newPool(t testing.TB, cfg membuf.Config) *membuf.Pool {
	t.Helper()
	p, err := membuf.NewPool(cfg)
	if err != nil {
		t.Fatalf("NewPool(%+v): %v", cfg, err)
	}
	return p
}

// classSizes lists the model's classes for a config, from their definition.
func classSizes(k, minSize, maxSize int) []int {
	var sizes []int
	for p := minSize; p < maxSize; p *= 2 {
		for j := range k {
			sizes = append(sizes, p+j*(p/k))
		}
	}
	return append(sizes, maxSize)
}

// TestGetEverySize: for every length from 1 to the largest class, Get
// returns that length from the smallest class that fits, within the waste
// bound, and a Put of it is reused by the next Get of the same class.
// (sizeclass_test.go checks the arithmetic itself for every size and every
// setting; this goes through the public API, kept small enough for -race.)
func TestGetEverySize(t *testing.T) {
	for _, tc := range []struct{ k, maxSize int }{{4, 1 << 20}, {1, 64 << 10}, {8, 64 << 10}} {
		k, maxSize := tc.k, tc.maxSize
		p := newPool(t, membuf.Config{ClassesPerDoubling: k, MaxSize: maxSize, Clearing: membuf.ClearNone})
		sizes := classSizes(k, membuf.DefaultMinSize, maxSize)
		if got := len(p.Stats().Classes); got != len(sizes) {
			t.Fatalf("k=%d: %d classes, want %d", k, got, len(sizes))
		}
		class := 0
		for n := 1; n <= maxSize; n++ {
			for sizes[class] < n {
				class++
			}
			b := p.Get(n)
			if len(*b) != n || cap(*b) != sizes[class] {
				t.Fatalf("k=%d: Get(%d): len %d cap %d, want cap %d", k, n, len(*b), cap(*b), sizes[class])
			}
			if n > membuf.DefaultMinSize && (cap(*b)-n)*k > n {
				t.Fatalf("k=%d: Get(%d): cap %d wastes more than 1/%d", k, n, cap(*b), k)
			}
			p.Put(b)
		}
		st := p.Stats()
		if tot := st.Total(); tot.Misses != uint64(len(sizes)) || tot.Hits != uint64(maxSize-len(sizes)) {
			t.Fatalf("k=%d: %d misses, %d hits; want one miss per class (%d)", k, tot.Misses, tot.Hits, len(sizes))
		}
		// A sample beyond the largest class: page-rounded, not retained.
		for _, n := range []int{maxSize + 1, maxSize + 4096, maxSize + 4097, 3 * maxSize} {
			b := p.Get(n)
			if want := (n + 4095) / 4096 * 4096; len(*b) != n || cap(*b) != want {
				t.Fatalf("Get(%d): len %d cap %d, want cap %d", n, len(*b), cap(*b), want)
			}
			p.Put(b)
		}
		if o := p.Stats().Oversize; o.Gets != 4 || o.Misses != 4 || o.Drops != 4 || o.RetainedBuffers != 0 {
			t.Fatalf("oversize stats %+v", o)
		}
	}
}

// TestPutFilesByCapacity: a buffer of any capacity goes to the largest class
// it fills, so the next Get of that class (and no larger one) reuses it.
func TestPutFilesByCapacity(t *testing.T) {
	const maxSize = 1 << 20
	p := newPool(t, membuf.Config{MaxSize: maxSize, Clearing: membuf.ClearNone})
	sizes := classSizes(4, 256, maxSize)
	backing := make([]byte, maxSize)
	caps := []int{}
	for _, s := range sizes {
		caps = append(caps, s, s+1, s-1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		caps = append(caps, 256+r.IntN(maxSize-256))
	}
	for _, c := range caps {
		if c < 256 || c > maxSize {
			continue
		}
		class := len(sizes) - 1
		for sizes[class] > c {
			class--
		}
		foreign := backing[:10:c]
		p.Put(&foreign)
		if class+1 < len(sizes) {
			// The next class up must not be served by it.
			b := p.Get(sizes[class+1])
			if &(*b)[0] == &backing[0] {
				t.Fatalf("cap %d: Get(%d) reused a buffer too small for it", c, sizes[class+1])
			}
		}
		b := p.Get(sizes[class])
		if &(*b)[:1][0] != &backing[0] || cap(*b) != c {
			t.Fatalf("cap %d: Get(%d) did not reuse it (cap %d); want class %d", c, sizes[class], cap(*b), sizes[class])
		}
	}
}

func TestReuseAndClearing(t *testing.T) {
	for _, tc := range []struct {
		clearing         membuf.Clearing
		inLength, beyond byte
	}{
		{membuf.ClearLength, 0, 7},
		{membuf.ClearCapacity, 0, 0},
		{membuf.ClearNone, 7, 7},
	} {
		t.Run(tc.clearing.String(), func(t *testing.T) {
			p := newPool(t, membuf.Config{Clearing: tc.clearing})
			b := p.Get(1000)
			if cap(*b) != 1024 {
				t.Fatalf("Get(1000): cap %d, want 1024", cap(*b))
			}
			full := (*b)[:cap(*b)]
			for i := range full {
				full[i] = 7
			}
			p.Put(b)
			b2 := p.Get(900)
			if b2 != b || len(*b2) != 900 {
				t.Fatalf("Get after Put did not reuse the buffer (len %d)", len(*b2))
			}
			full = (*b2)[:cap(*b2)]
			for i, v := range full {
				want := tc.beyond
				if i < 900 {
					want = tc.inLength
				}
				if v != want {
					t.Fatalf("byte %d = %d, want %d", i, v, want)
				}
			}
			if st := p.Stats(); st.Total().Hits != 1 || st.Total().Misses != 1 {
				t.Fatalf("stats %+v", st.Total())
			}
		})
	}
}

func TestGetEmpty(t *testing.T) {
	p := newPool(t, membuf.Config{})
	for _, n := range []int{0, -1, -1 << 40} {
		b := p.Get(n)
		if b == nil || len(*b) != 0 || cap(*b) != 0 {
			t.Fatalf("Get(%d) = %v", n, b)
		}
		p.Put(b)
	}
	if st := p.Stats(); st.Total().Gets != 0 || st.Undersize != 3 {
		t.Fatalf("Get(<=0) counted: %+v, undersize %d", st.Total(), st.Undersize)
	}
}

// TestBudgetNeverExceeded runs many goroutines against a small budget while
// another samples the retained bytes.
func TestBudgetNeverExceeded(t *testing.T) {
	const budget = 1 << 20
	p := newPool(t, membuf.Config{MaxSize: 128 << 10, Budget: budget, RetainOversize: true, IdleTimeout: 5 * time.Millisecond})
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := p.Stats()
			var sum int64
			for _, c := range st.Classes {
				sum += c.RetainedBytes
			}
			sum += st.Oversize.RetainedBytes
			if st.RetainedBytes > budget || sum != st.RetainedBytes {
				t.Errorf("retained %d (classes sum %d), budget %d", st.RetainedBytes, sum, budget)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			var held []*[]byte
			for range 3000 {
				if len(held) < 8 && r.IntN(2) == 0 {
					held = append(held, p.Get(1+r.IntN(200<<10)))
					continue
				}
				if len(held) > 0 {
					i := r.IntN(len(held))
					p.Put(held[i])
					held = append(held[:i], held[i+1:]...)
				}
				// Foreign buffers count against the budget too.
				if r.IntN(20) == 0 {
					f := make([]byte, r.IntN(150<<10))
					p.Put(&f)
				}
			}
			for _, b := range held {
				p.Put(b)
			}
		})
	}
	wg.Wait()
	close(stop)
	watcher.Wait()
	st := p.Stats()
	if st.RetainedBytes > budget {
		t.Fatalf("retained %d > budget %d", st.RetainedBytes, budget)
	}
	checkStats(t, st)
	if st.Total().Drops == 0 {
		t.Fatalf("no drops: the budget was never reached, the test shows nothing")
	}
}

// checkStats verifies the identities documented on ClassStats.
func checkStats(t *testing.T, st membuf.Stats) {
	t.Helper()
	for _, c := range append(st.Classes, st.Oversize) {
		if c.Gets != c.Hits+c.Misses {
			t.Errorf("class %d: gets %d != hits %d + misses %d", c.Size, c.Gets, c.Hits, c.Misses)
		}
		if int64(c.Puts-c.Drops-c.Hits-c.Released) != c.RetainedBuffers {
			t.Errorf("class %d: puts %d - drops %d - hits %d - released %d != retained %d", c.Size, c.Puts, c.Drops, c.Hits, c.Released, c.RetainedBuffers)
		}
		if c.RetainedBuffers < 0 || c.RetainedBytes < int64(c.Size)*c.RetainedBuffers {
			t.Errorf("class %d: retained %d buffers, %d bytes", c.Size, c.RetainedBuffers, c.RetainedBytes)
		}
	}
}

func TestStatsConsistent(t *testing.T) {
	p := newPool(t, membuf.Config{MaxSize: 64 << 10, Budget: 512 << 10, RetainOversize: true})
	r := rand.New(rand.NewPCG(7, 7))
	var held []*[]byte
	for i := range 20000 {
		switch {
		case r.IntN(2) == 0:
			held = append(held, p.Get(r.IntN(80<<10)))
		case len(held) > 0:
			j := r.IntN(len(held))
			p.Put(held[j])
			held = append(held[:j], held[j+1:]...)
		}
		if i%5000 == 0 {
			p.Release()
		}
	}
	st := p.Stats()
	checkStats(t, st)
	if st.Total().Hits == 0 || st.Total().Misses == 0 || st.Total().Drops == 0 || st.Total().Released == 0 {
		t.Fatalf("workload did not exercise every counter: %+v", st.Total())
	}
}

// TestRetentionAcrossGC: the budget pool keeps its buffers through two
// collections; a sync.Pool-mode pool loses them.
func TestRetentionAcrossGC(t *testing.T) {
	for _, tc := range []struct {
		retention membuf.Retention
		wantHits  bool
	}{{membuf.RetainBudget, true}, {membuf.RetainSyncPool, false}} {
		t.Run(tc.retention.String(), func(t *testing.T) {
			p := newPool(t, membuf.Config{Retention: tc.retention})
			var bufs []*[]byte
			for range 16 {
				bufs = append(bufs, p.Get(32<<10))
			}
			for _, b := range bufs {
				p.Put(b)
			}
			runtime.GC()
			runtime.GC()
			for range 16 {
				p.Get(32 << 10)
			}
			hits := p.Stats().Total().Hits
			if tc.wantHits && hits != 16 {
				t.Fatalf("%d of 16 buffers survived two GCs", hits)
			}
			if !tc.wantHits && hits != 0 {
				t.Fatalf("sync.Pool mode kept %d buffers through two GCs", hits)
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   membuf.Config
		field string
	}{
		{membuf.Config{ClassesPerDoubling: 3}, "ClassesPerDoubling"},
		{membuf.Config{ClassesPerDoubling: 16}, "ClassesPerDoubling"},
		{membuf.Config{ClassesPerDoubling: -1}, "ClassesPerDoubling"},
		{membuf.Config{MinSize: 100}, "MinSize"},
		{membuf.Config{MinSize: 8}, "MinSize"},
		{membuf.Config{MinSize: -256}, "MinSize"},
		{membuf.Config{MinSize: 8 << 20}, "MinSize"}, // above the default MaxSize
		{membuf.Config{MaxSize: 3 << 20}, "MaxSize"},
		{membuf.Config{MaxSize: 2 << 30}, "MaxSize"},
		{membuf.Config{MaxSize: -1}, "MaxSize"},
		{membuf.Config{MinSize: 4096, MaxSize: 1024}, "MaxSize"},
		{membuf.Config{Clearing: 3}, "Clearing"},
		{membuf.Config{Clearing: -1}, "Clearing"},
		{membuf.Config{Retention: 2}, "Retention"},
		{membuf.Config{Budget: -1}, "Budget"},
		{membuf.Config{IdleTimeout: time.Microsecond}, "IdleTimeout"},
	} {
		p, err := membuf.NewPool(tc.cfg)
		var ce *membuf.ConfigError
		if p != nil || !errors.As(err, &ce) {
			t.Fatalf("NewPool(%+v) = %v, %v; want a *ConfigError", tc.cfg, p, err)
		}
		if ce.Field != tc.field || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "want") {
			t.Errorf("NewPool(%+v): %q, want it to name %s and the allowed range", tc.cfg, err, tc.field)
		}
		t.Log(err)
	}
	for _, cfg := range []membuf.Config{
		{}, {ClassesPerDoubling: 1, MinSize: 16, MaxSize: 16}, {ClassesPerDoubling: 8, MinSize: 16, MaxSize: 1 << 30},
		{Budget: 1, IdleTimeout: -1}, {IdleTimeout: time.Millisecond, Retention: membuf.RetainSyncPool},
	} {
		if _, err := membuf.NewPool(cfg); err != nil {
			t.Errorf("NewPool(%+v): %v", cfg, err)
		}
	}
}

func TestPutOddBuffers(t *testing.T) {
	p := newPool(t, membuf.Config{MaxSize: 64 << 10})
	var nilSlice []byte
	zero := make([]byte, 0)
	tiny := make([]byte, 100)
	p.Put(nil)
	p.Put(&nilSlice)
	p.Put(&zero)
	p.Put(&tiny)
	if st := p.Stats(); st.Undersize != 4 || st.Total().Puts != 0 || st.RetainedBytes != 0 {
		t.Fatalf("undersize %d, %+v", st.Undersize, st.Total())
	}
	// Foreign: capacity 1000 fills the 896-byte class.
	foreign := make([]byte, 5, 1000)
	p.Put(&foreign)
	if b := p.Get(896); b != &foreign || len(*b) != 896 || cap(*b) != 1000 {
		t.Fatalf("foreign buffer not reused by its class: len %d cap %d", len(*b), cap(*b))
	}
	// Oversize: dropped unless RetainOversize.
	big := make([]byte, 100<<10)
	p.Put(&big)
	if st := p.Stats(); st.Oversize.Puts != 1 || st.Oversize.Drops != 1 || st.RetainedBytes != 0 {
		t.Fatalf("oversize put: %+v", st.Oversize)
	}
	keep := newPool(t, membuf.Config{MaxSize: 64 << 10, RetainOversize: true})
	sizes := []int{300 << 10, 100 << 10, 200 << 10}
	for _, n := range sizes {
		b := make([]byte, n)
		keep.Put(&b)
	}
	// Best fit: 150 KiB takes the 200 KiB buffer, not the 300 KiB one.
	if b := keep.Get(150 << 10); cap(*b) != 200<<10 {
		t.Fatalf("Get(150KiB) got cap %d, want the 200 KiB buffer", cap(*b))
	}
	if b := keep.Get(400 << 10); cap(*b) != 400<<10 {
		t.Fatalf("Get(400KiB) got cap %d, want a new buffer", cap(*b))
	}
	for range 10 {
		b := make([]byte, 70<<10)
		keep.Put(&b)
	}
	st := keep.Stats()
	if max := int64(4 * st.Shards); st.Oversize.RetainedBuffers > max {
		t.Fatalf("%d oversize buffers retained, at most %d", st.Oversize.RetainedBuffers, max)
	}
	checkStats(t, st)
}

// TestIdleRelease: buffers unused for an interval are released; a class in
// steady use keeps the buffers it uses.
func TestIdleRelease(t *testing.T) {
	// The interval is long next to the 1-2ms between uses of the busy
	// class, so that a loaded CI machine does not make it look idle.
	p := newPool(t, membuf.Config{IdleTimeout: 100 * time.Millisecond})
	var idle []*[]byte
	for range 5 {
		idle = append(idle, p.Get(10000))
	}
	for _, b := range idle {
		p.Put(b)
	}
	busy := p.Get(50000)
	p.Put(busy)
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := p.Stats()
		if st.Total().Released >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle buffers not released: %+v", st.Total())
		}
		// Keep the 50000-byte class in use.
		p.Put(p.Get(50000))
		time.Sleep(time.Millisecond)
	}
	for range 150 { // more than a whole interval
		p.Put(p.Get(50000))
		time.Sleep(time.Millisecond)
	}
	st := p.Stats()
	checkStats(t, st)
	var idleClass, busyClass membuf.ClassStats
	for _, c := range st.Classes {
		if c.Size == 10240 {
			idleClass = c
		}
		if c.Size == 57344 {
			busyClass = c
		}
	}
	if idleClass.RetainedBuffers != 0 || idleClass.Released != 5 {
		t.Errorf("idle class: %+v", idleClass)
	}
	if busyClass.RetainedBuffers != 1 || busyClass.Misses != 1 {
		t.Errorf("busy class lost its buffer: %+v", busyClass)
	}
}

// TestUnreferencedPoolCollected: the idle timer does not keep a pool alive.
func TestUnreferencedPoolCollected(t *testing.T) {
	collected := make(chan struct{})
	func() {
		p := newPool(t, membuf.Config{IdleTimeout: time.Millisecond})
		p.Put(p.Get(1000))
		runtime.AddCleanup(p, func(ch chan struct{}) { close(ch) }, collected)
	}()
	for range 100 {
		runtime.GC()
		select {
		case <-collected:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("pool with an idle timer was never collected")
}

func TestDebugDetectsWriteAfterPut(t *testing.T) {
	var reports []membuf.Report
	var mu sync.Mutex
	prev := membuf.SetReporter(func(r membuf.Report) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	})
	defer membuf.SetReporter(prev)
	for _, retention := range []membuf.Retention{membuf.RetainBudget, membuf.RetainSyncPool} {
		reports = nil
		p := newPool(t, membuf.Config{Debug: true, Retention: retention})
		// A clean round trip reports nothing.
		p.Put(p.Get(3000))
		p.Put(p.Get(3000))
		if len(reports) != 0 {
			t.Fatalf("%v: clean reuse reported: %v", retention, reports)
		}
		b := p.Get(3000)
		p.Put(b)
		(*b)[:cap(*b)][3050] = 1 // the bug: a write after Put, beyond the old length
		b2 := p.Get(3000)
		if retention == membuf.RetainSyncPool && b2 != b {
			continue // sync.Pool may drop it; nothing to check
		}
		if len(reports) != 1 {
			t.Fatalf("%v: %d reports, want 1", retention, len(reports))
		}
		r := reports[0]
		if r.Kind != membuf.ReportUseAfterFree || !strings.Contains(r.Message, "offset 3050") || !strings.Contains(r.Message, "class 3072") {
			t.Errorf("%v: report %v", retention, r)
		}
		if retention == membuf.RetainBudget && !strings.Contains(r.Freed, "TestDebugDetectsWriteAfterPut") {
			t.Errorf("report does not say where the buffer was Put:\n%s", r)
		}
		// The buffer is still handed out, cleared as configured.
		for i, v := range *b2 {
			if v != 0 {
				t.Fatalf("byte %d = %d after clearing", i, v)
			}
		}
		t.Log(r)
	}
}

func TestDefaultPool(t *testing.T) {
	if membuf.DefaultPool() != membuf.DefaultPool() {
		t.Fatal("DefaultPool returned two pools")
	}
	var _ membuf.BufferPool = membuf.DefaultPool()
	st := membuf.DefaultPool().Stats()
	if len(st.Classes) != 57 || st.Budget != membuf.DefaultBudget || st.Classes[0].Size != 256 || st.Classes[56].Size != 4<<20 {
		t.Fatalf("default pool: %d classes, budget %d", len(st.Classes), st.Budget)
	}
}

// TestConcurrentEverything runs Get, Put, Stats, Release and idle release
// together, for the race detector, in both retention modes.
func TestConcurrentEverything(t *testing.T) {
	for _, retention := range []membuf.Retention{membuf.RetainBudget, membuf.RetainSyncPool} {
		p := newPool(t, membuf.Config{Retention: retention, MaxSize: 64 << 10, Budget: 1 << 20, IdleTimeout: time.Millisecond, RetainOversize: true, Debug: true})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 9))
				for i := range 2000 {
					b := p.Get(r.IntN(100 << 10))
					(*b)[:cap(*b)][0] = 1
					p.Put(b)
					if i%500 == 0 {
						p.Stats()
						p.Release()
					}
				}
			})
		}
		wg.Wait()
		st := p.Stats()
		if retention == membuf.RetainBudget {
			checkStats(t, st)
		}
		if tot := st.Total(); tot.Gets != 8*2000-st.Undersize {
			t.Errorf("%v: %d gets, want %d", retention, tot.Gets, 8*2000-st.Undersize)
		}
	}
}

// The default budget must leave the collector room under a memory limit:
// retained buffers are live heap it cannot free.
func TestDefaultBudgetFollowsMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(40 << 20)
	defer debug.SetMemoryLimit(old)
	p, err := membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Stats().Budget, int64(10<<20); got != want {
		t.Errorf("default budget under a 40 MiB memory limit = %d, want a quarter of it, %d", got, want)
	}
	// An explicit budget is the caller's to choose.
	p, err = membuf.NewPool(membuf.Config{Budget: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().Budget; got != 32<<20 {
		t.Errorf("explicit budget = %d, want %d", got, 32<<20)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	p, err = membuf.NewPool(membuf.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Stats().Budget; got != membuf.DefaultBudget {
		t.Errorf("default budget with no memory limit = %d, want %d", got, membuf.DefaultBudget)
	}
}

// A snapshot taken while other goroutines Get from a sync.Pool mode pool
// must never show more misses than gets (Hits would wrap around to nearly
// 2^64 in a metrics scrape).
func TestSyncPoolStatsConsistentUnderLoad(t *testing.T) {
	p := newPool(t, membuf.Config{Retention: membuf.RetainSyncPool})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				p.Get(300) // never Put: every get is a miss
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 20000 {
		st := p.Stats()
		for _, c := range st.Classes {
			if c.Misses > c.Gets || c.Hits > c.Gets {
				t.Fatalf("snapshot %d, class %d: gets %d, misses %d, hits %d", i, c.Size, c.Gets, c.Misses, c.Hits)
			}
		}
	}
}
