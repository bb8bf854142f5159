package membuf_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/internal/testenv"
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
// setting; this goes through the public API.) Under the race detector,
// whose sync.Pool drops a quarter of Puts (so a quarter of these Gets
// allocate and zero up to 1 MiB), it takes every length up to 16 KiB and
// every 61st above; CI also runs it without -race.
func TestGetEverySize(t *testing.T) {
	membuf.SetDebugEnv(t, false) // debug mode would poison a million buffers of up to 1 MiB
	for _, tc := range []struct{ k, maxSize int }{{4, 1 << 20}, {1, 64 << 10}, {8, 64 << 10}} {
		k, maxSize := tc.k, tc.maxSize
		p := newPool(t, membuf.Config{ClassesPerDoubling: k, MaxSize: maxSize, Clearing: membuf.ClearNone})
		sizes := classSizes(k, membuf.DefaultMinSize, maxSize)
		if got := len(p.Stats().Classes); got != len(sizes) {
			t.Fatalf("k=%d: %d classes, want %d", k, got, len(sizes))
		}
		class := 0
		var gets uint64
		step := func(n int) int {
			if testenv.Race && n >= 16<<10 {
				return 61 // prime: lands on every offset within a class in turn
			}
			return 1
		}
		for n := 1; n <= maxSize; n += step(n) {
			gets++
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
		tot := st.Total()
		if tot.Gets != gets || tot.Puts != gets {
			t.Fatalf("k=%d: %d gets, %d puts counted; want %d of each", k, tot.Gets, tot.Puts, gets)
		}
		// One miss per class, and then reuse. The front is a sync.Pool: a
		// goroutine that moves to another P misses the buffer it left in
		// the old P's private slot, and under the race detector sync.Pool
		// drops a quarter of Puts; so beyond the first miss per class, the
		// bound is loose there.
		minHits := tot.Gets - tot.Gets/100
		if testenv.Race {
			minHits = tot.Gets / 2
		}
		if tot.Misses < uint64(len(sizes)) || tot.Hits < minHits {
			t.Fatalf("k=%d: %d misses, %d hits; want one miss per class (%d), then reuse", k, tot.Misses, tot.Hits, len(sizes))
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
// it fills, so Gets of that class (and of no larger one) reuse it.
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
	// get takes a buffer of class j and checks that, if it is one of the
	// foreign buffers (all views of backing), its capacity fills class j
	// and no more. It reports whether it was foreign.
	get := func(j, c int) bool {
		b := p.Get(sizes[j])
		if &(*b)[:1][0] != &backing[0] {
			return false
		}
		if got := cap(*b); got < sizes[j] || j+1 < len(sizes) && got >= sizes[j+1] {
			t.Fatalf("after a Put of cap %d: Get(%d) returned a foreign buffer of cap %d, not of that class", c, sizes[j], got)
		}
		return true
	}
	var reused, lost int
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
			get(class+1, c) // the next class up must not be served by it
		}
		// The front, like any sync.Pool, can miss a buffer (the goroutine
		// moved to another P; the race detector drops a quarter of Puts),
		// and a buffer it missed may come back later, so the check is that
		// whatever comes back fills the class, and that most come back.
		if get(class, c) {
			reused++
		} else {
			lost++
		}
	}
	if reused < 2*lost {
		t.Errorf("%d foreign buffers reused, %d lost: the pool does not keep what it is given", reused, lost)
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
			membuf.SetDebugEnv(t, false) // debug mode poisons what is beyond the length
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
			if st := p.Stats(); st.Total().Hits != 1 || st.Total().Misses != 1 || st.Total().StoreHits != 1 {
				t.Fatalf("stats %+v: want the second Get served by the store", st.Total())
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
	var peak int64
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
			peak = max(peak, st.RetainedBytes)
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
	// Each of the two shards holds at most 512 KiB, and is full once the
	// next buffer (at most 128 KiB, or 200 KiB oversize) does not fit.
	if peak < budget/2 {
		t.Fatalf("the store never held more than %d bytes: the budget was never approached, the test shows nothing", peak)
	}
}

// checkStats verifies the identities documented on ClassStats, and that the
// parts are no larger than their wholes.
func checkStats(t *testing.T, st membuf.Stats) {
	t.Helper()
	var bytes int64
	for _, c := range append(st.Classes, st.Oversize) {
		if c.Gets != c.Hits+c.Misses {
			t.Errorf("class %d: gets %d != hits %d + misses %d", c.Size, c.Gets, c.Hits, c.Misses)
		}
		if int64(c.StorePuts-c.StoreHits-c.Released) != c.RetainedBuffers {
			t.Errorf("class %d: store puts %d - store hits %d - released %d != retained %d", c.Size, c.StorePuts, c.StoreHits, c.Released, c.RetainedBuffers)
		}
		if c.StoreHits > c.Hits || c.StorePuts+c.Drops > c.Puts {
			t.Errorf("class %d: %+v: a part larger than its whole", c.Size, c)
		}
		if c.RetainedBuffers < 0 || c.RetainedBytes < int64(c.Size)*c.RetainedBuffers {
			t.Errorf("class %d: retained %d buffers, %d bytes", c.Size, c.RetainedBuffers, c.RetainedBytes)
		}
		bytes += c.RetainedBytes
	}
	if bytes != st.RetainedBytes || st.RetainedBytes > st.Budget {
		t.Errorf("classes retain %d bytes, the pool says %d, budget %d", bytes, st.RetainedBytes, st.Budget)
	}
}

func TestStatsConsistent(t *testing.T) {
	membuf.SetDebugEnv(t, false) // the workload must reach the front, which debug mode does not use
	p := newPool(t, membuf.Config{MaxSize: 64 << 10, Budget: 512 << 10, RetainOversize: true})
	r := rand.New(rand.NewPCG(7, 7))
	var held []*[]byte
	var gets, puts uint64 // calls that count: length > 0, capacity >= MinSize
	for i := range 20000 {
		switch {
		case r.IntN(2) == 0:
			n := r.IntN(80 << 10)
			held = append(held, p.Get(n))
			if n > 0 {
				gets++
			}
		case len(held) > 0:
			j := r.IntN(len(held))
			if cap(*held[j]) >= membuf.DefaultMinSize {
				puts++
			}
			p.Put(held[j])
			held = append(held[:j], held[j+1:]...)
		}
		if i%5000 == 0 {
			p.Release()
		}
	}
	st := p.Stats()
	checkStats(t, st)
	tot := st.Total()
	if tot.Gets != gets || tot.Puts != puts {
		t.Errorf("stats count %d gets and %d puts; the test made %d and %d", tot.Gets, tot.Puts, gets, puts)
	}
	if tot.Hits == tot.StoreHits || tot.StoreHits == 0 || tot.Misses == 0 || tot.Drops == 0 || tot.Released == 0 {
		t.Fatalf("workload did not exercise every counter: %+v", tot)
	}
}

// TestRetentionAcrossGC: the buffers a class needed survive collections in
// the store, round after round, while the front loses what it held.
func TestRetentionAcrossGC(t *testing.T) {
	p := newPool(t, membuf.Config{})
	var bufs []*[]byte
	for range 16 {
		bufs = append(bufs, p.Get(32<<10))
	}
	for round := range 4 {
		for _, b := range bufs {
			p.Put(b)
		}
		bufs = bufs[:0]
		before := p.Stats().Total()
		runtime.GC()
		runtime.GC()
		for range 16 {
			bufs = append(bufs, p.Get(32<<10))
		}
		after := p.Stats().Total()
		if hits := after.StoreHits - before.StoreHits; hits != 16 || after.Misses != 16 {
			t.Fatalf("round %d: %d of 16 buffers came from the store after two GCs, %d misses in all (want 16: the first round's)", round, hits, after.Misses)
		}
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
		{Budget: 1, IdleTimeout: -1}, {IdleTimeout: time.Millisecond},
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
	// Foreign: capacity 1000 fills the 896-byte class. A miss first gives
	// the class a reserve, so the Put goes to the store, which always
	// gives it back (the front, a sync.Pool, may not).
	p.Get(896)
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
	// The busy class's buffer cycles through the front (the store in
	// debug mode), which idle release does not touch. The front, like any
	// sync.Pool, misses now and then (a goroutine that sleeps wakes on
	// another P; the race detector drops a quarter of Puts), so the check
	// is that most Gets were served, not all.
	if busyClass.Gets < 150 || busyClass.Hits*2 < busyClass.Gets {
		t.Errorf("busy class lost its buffers: %+v", busyClass)
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
	defer func() { membuf.SetReporter(prev) }()
	p := newPool(t, membuf.Config{Debug: true})
	// A clean round trip reports nothing.
	p.Put(p.Get(3000))
	p.Put(p.Get(3000))
	if len(reports) != 0 {
		t.Fatalf("clean reuse reported: %v", reports)
	}
	b := p.Get(3000)
	p.Put(b)
	(*b)[:cap(*b)][3050] = 1 // the bug: a write after Put, beyond the old length
	b2 := p.Get(3000)
	if b2 != b {
		t.Fatal("debug mode did not hand the buffer out again")
	}
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1", len(reports))
	}
	r := reports[0]
	if r.Kind != membuf.ReportUseAfterFree || !strings.Contains(r.Message, "offset 3050") || !strings.Contains(r.Message, "class 3072") {
		t.Errorf("report %v", r)
	}
	if !strings.Contains(r.Freed, "TestDebugDetectsWriteAfterPut") {
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

func TestDefaultPool(t *testing.T) {
	if first, second := membuf.DefaultPool(), membuf.DefaultPool(); first != second {
		t.Fatal("DefaultPool returned two pools")
	}
	var _ membuf.BufferPool = membuf.DefaultPool()
	st := membuf.DefaultPool().Stats()
	// The documented default budget, from the memory limit in force (the
	// environment's GOMEMLIMIT, if any): min(64 MiB, limit/4).
	want := min(membuf.DefaultBudget, debug.SetMemoryLimit(-1)/4)
	if len(st.Classes) != 57 || st.Budget != want || st.Classes[0].Size != 256 || st.Classes[56].Size != 4<<20 {
		t.Fatalf("default pool: %d classes, budget %d (want %d)", len(st.Classes), st.Budget, want)
	}
}

// TestConcurrentEverything runs Get, Put, Stats, Release and idle release
// together, for the race detector, with debug mode off and on.
func TestConcurrentEverything(t *testing.T) {
	for _, dbg := range []bool{false, true} {
		p := newPool(t, membuf.Config{MaxSize: 64 << 10, Budget: 1 << 20, IdleTimeout: time.Millisecond, RetainOversize: true, Debug: dbg})
		var wg sync.WaitGroup
		var calls atomic.Uint64
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 9))
				for i := range 2000 {
					if n := r.IntN(100 << 10); n > 0 {
						b := p.Get(n)
						calls.Add(1)
						(*b)[:cap(*b)][0] = 1
						p.Put(b)
					}
					if i%500 == 0 {
						p.Stats()
						p.Release()
					}
				}
			})
		}
		wg.Wait()
		st := p.Stats()
		checkStats(t, st)
		checkCallsCounted(t, st.Total(), calls.Load(), membuf.FrontCountsExact || dbg)
	}
}

// The default budget must leave the collector space under a memory limit:
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

// TestStatsIdentitiesUnderLoad: a snapshot taken while other goroutines Get
// and Put satisfies the identities on ClassStats, not only a quiet one.
func TestStatsIdentitiesUnderLoad(t *testing.T) {
	p := newPool(t, membuf.Config{MaxSize: 64 << 10, Budget: 256 << 10})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 5))
			var held []*[]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				if len(held) < 16 && r.IntN(2) == 0 {
					held = append(held, p.Get(1+r.IntN(64<<10)))
				} else if len(held) > 0 {
					p.Put(held[len(held)-1])
					held = held[:len(held)-1]
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for range 2000 {
		checkStats(t, p.Stats())
		if t.Failed() {
			return
		}
	}
}

// TestFrontBounded: what the pool holds beyond its budget, in the front, is
// what was Put since the collection before last: after two collections only
// the store's buffers are still reachable, round after round, however much
// went to the front.
func TestFrontBounded(t *testing.T) {
	p := newPool(t, membuf.Config{MaxSize: 64 << 10, Budget: 256 << 10})
	seen := map[weak.Pointer[byte]]bool{} // weak pointers to one object are equal
	var front uint64
	for round := range 4 {
		// 200 buffers of 64 KiB, 50 times the budget: the misses raise
		// the reserve to what the budget holds, the Puts fill the store
		// to it, and the rest go to the front (in debug mode: dropped).
		held := make([]*[]byte, 200)
		for i := range held {
			held[i] = p.Get(64 << 10)
		}
		for i, b := range held {
			seen[weak.Make(&(*b)[0])] = true
			p.Put(b)
			held[i] = nil
		}
		runtime.GC()
		runtime.GC()
		alive := 0
		for w := range seen {
			if w.Value() != nil {
				alive++
			}
		}
		st := p.Stats()
		tot := st.Total()
		checkStats(t, st)
		if int64(alive) > tot.RetainedBuffers {
			t.Fatalf("round %d: %d of the %d buffers Put are still reachable after two collections; the store holds %d", round, alive, len(seen), tot.RetainedBuffers)
		}
		front = tot.Puts - tot.StorePuts - tot.Drops
	}
	if front == 0 && !testenv.MembufDebug() {
		t.Fatal("nothing went to the front: the test shows nothing")
	}
}

// TestSteadyGetPutStaysOffTheStore: a Get/Put loop whose working set is one
// buffer runs on the front, once the first store hit (in the epoch of the
// store put) has shrunk the reserve: it does not cycle its buffer through the
// store, whose locks would cost what the front saves.
func TestSteadyGetPutStaysOffTheStore(t *testing.T) {
	membuf.SetDebugEnv(t, false) // debug mode uses only the store
	p := newPool(t, membuf.Config{})
	const n = 10000
	for range n {
		p.Put(p.Get(4096))
	}
	tot := p.Stats().Total()
	// Exactly one store put and hit unless the goroutine moves to another
	// P (the buffer stays in the old P's private slot) or the race
	// detector drops a Put (a quarter of them): each such miss costs one
	// more store put and hit, not a cycle.
	limit := uint64(n / 100)
	if testenv.Race {
		limit = n / 2
	}
	if tot.Gets != n || tot.StoreHits > limit || tot.StorePuts > limit+1 {
		t.Fatalf("%d Get/Put pairs: %+v; want at most %d through the store", n, tot, limit)
	}
}

// TestGetUncleared: GetUncleared hands out a reused buffer as it was Put,
// whatever the pool's clearing, and new buffers zeroed; Get still clears.
func TestGetUncleared(t *testing.T) {
	membuf.SetDebugEnv(t, false) // debug mode poisons returned buffers
	p := newPool(t, membuf.Config{Clearing: membuf.ClearCapacity})
	// Two misses give the class a reserve of two, so both Puts go to the
	// store, which (unlike the front, a sync.Pool) always gives them back.
	bufs := []*[]byte{p.GetUncleared(1000), p.GetUncleared(1000)}
	for _, b := range bufs {
		if len(*b) != 1000 || cap(*b) != 1024 {
			t.Fatalf("GetUncleared(1000): len %d cap %d", len(*b), cap(*b))
		}
		full := (*b)[:cap(*b)]
		for i, v := range full {
			if v != 0 {
				t.Fatalf("new buffer: byte %d = %d", i, v)
			}
			full[i] = 7
		}
	}
	p.Put(bufs[0])
	p.Put(bufs[1])
	b := p.GetUncleared(900)
	for i, v := range (*b)[:cap(*b)] {
		if v != 7 {
			t.Fatalf("reused buffer: byte %d = %d, want 7 (not cleared)", i, v)
		}
	}
	b = p.Get(900)
	for i, v := range (*b)[:cap(*b)] {
		if v != 0 {
			t.Fatalf("Get: byte %d = %d, want 0 (ClearCapacity)", i, v)
		}
	}
	if tot := p.Stats().Total(); tot.StoreHits != 2 {
		t.Fatalf("the buffers were not reused: %+v", tot)
	}
}
