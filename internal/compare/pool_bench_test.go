package compare

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/bytedance/gopkg/lang/mcache"
	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
)

// A pool under test: get returns a slice of length n that put takes back.
// Every pool goes through the same two indirect calls, so the comparison
// is of the pools, not of the call sites.
type benchPool struct {
	name string
	get  func(n int) *[]byte
	put  func(*[]byte)
}

func fromBufferPool(name string, p membuf.BufferPool) benchPool {
	return benchPool{name: name, get: p.Get, put: p.Put}
}

func mustMembuf(cfg membuf.Config) *membuf.Pool {
	p, err := membuf.NewPool(cfg)
	if err != nil {
		panic(err)
	}
	return p
}

func grpcBinary9to20() mem.BufferPool {
	p, err := mem.NewBinaryTieredBufferPool(9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	if err != nil {
		panic(err)
	}
	return p
}

// bareSyncPool is the floor: one sync.Pool of *[]byte, no classes, no
// statistics. A buffer too small for the request is dropped and replaced.
type bareSyncPool struct {
	p     sync.Pool
	clear bool
}

func (s *bareSyncPool) Get(n int) *[]byte {
	if b, _ := s.p.Get().(*[]byte); b != nil && cap(*b) >= n {
		*b = (*b)[:n]
		if s.clear {
			clear(*b)
		}
		return b
	}
	b := make([]byte, n)
	return &b
}

func (s *bareSyncPool) Put(b *[]byte) { s.p.Put(b) }

// pools returns fresh instances of every pool compared, so that no run
// inherits another's retained buffers (grpc-go's default pool is the
// process-wide one, as users get it).
func pools() []benchPool {
	// mcache's API is a bare []byte; its adapter allocates the *[]byte
	// each Get returns (24 B/op), a cost of the API, not of the pool.
	mc := benchPool{name: "mcache"}
	mc.get = func(n int) *[]byte {
		b := mcache.Malloc(n)
		return &b
	}
	mc.put = func(b *[]byte) { mcache.Free(*b) }
	return []benchPool{
		fromBufferPool("membuf-clearlen", mustMembuf(membuf.Config{Clearing: membuf.ClearLength})),
		fromBufferPool("membuf-clearcap", mustMembuf(membuf.Config{Clearing: membuf.ClearCapacity})),
		fromBufferPool("membuf-clearnone", mustMembuf(membuf.Config{Clearing: membuf.ClearNone})),
		fromBufferPool("grpc-default", mem.DefaultBufferPool()),
		fromBufferPool("grpc-binary9to20", grpcBinary9to20()),
		fromBufferPool("syncpool", &bareSyncPool{}),
		fromBufferPool("syncpool-clear", &bareSyncPool{clear: true}),
		mc,
	}
}

// sizes are the issue's: both sides of grpc-go's default tiers (256 B, 4, 16,
// 32 KiB, 1 MiB), the gRPC-typical 32,000 B, and sizes just past a power of
// two, where power-of-two pools waste most.
var sizes = []int{1, 512, 4096, 16384, 32000, 32769, 33000, 65537, 262144, 1 << 20}

// BenchmarkGetPut is one Get and one Put of the same size, one goroutine.
// mcache's Get allocates the *[]byte its adapter returns (24 B/op): its API
// hands out bare slices.
func BenchmarkGetPut(b *testing.B) {
	for _, size := range sizes {
		for _, p := range pools() {
			b.Run("size="+strconv.Itoa(size)+"/pool="+p.name, func(b *testing.B) {
				b.ReportAllocs()
				p.put(p.get(size)) // warm: the first Get of a class allocates
				for b.Loop() {
					p.put(p.get(size))
				}
			})
		}
	}
}

// BenchmarkGetPutParallel is BenchmarkGetPut from GOMAXPROCS goroutines.
func BenchmarkGetPutParallel(b *testing.B) {
	for _, size := range sizes {
		for _, p := range pools() {
			b.Run("size="+strconv.Itoa(size)+"/pool="+p.name, func(b *testing.B) {
				b.ReportAllocs()
				p.put(p.get(size))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						p.put(p.get(size))
					}
				})
			})
		}
	}
}

// burstOps is the length of one timed burst in BenchmarkGetPutBurst:
// about 100 to 400 µs of Get+Put, far shorter than a scheduler time slice,
// so that most bursts run uninterrupted even on a shared machine.
const burstOps = 4096

// BenchmarkGetPutBurst is BenchmarkGetPut timed in bursts of burstOps
// pairs, reporting besides the mean (ns/op) the fastest burst (min-ns/op).
// On a machine shared with other work the mean carries every preemption
// and every neighbour's cache traffic, and single sizes swing by 50% or
// more from run to run; the fastest of thousands of short bursts is what
// the pool costs when it has the core, and that is steady enough to tell
// a few nanoseconds apart. Compare min-ns/op across pools of one run, and
// across builds run alternately.
func BenchmarkGetPutBurst(b *testing.B) {
	for _, size := range sizes {
		for _, p := range pools() {
			b.Run("size="+strconv.Itoa(size)+"/pool="+p.name, func(b *testing.B) {
				b.ReportAllocs()
				p.put(p.get(size))
				fastest := time.Duration(math.MaxInt64)
				for done := 0; done < b.N; {
					n := min(burstOps, b.N-done)
					start := time.Now()
					for range n {
						p.put(p.get(size))
					}
					if d := time.Since(start); n == burstOps && d < fastest {
						fastest = d
					}
					done += n
				}
				if fastest < time.Duration(math.MaxInt64) {
					b.ReportMetric(float64(fastest.Nanoseconds())/burstOps, "min-ns/op")
				}
			})
		}
	}
}

// logNormalSizes draws n sizes from a log-normal spread (median 32 KiB,
// sigma 1.5 in natural log) clamped to [1 KiB, 4 MiB], with a fixed seed.
func logNormalSizes(n int) []int {
	r := rand.New(rand.NewPCG(2026, 11))
	out := make([]int, n)
	for i := range out {
		s := math.Exp(math.Log(32<<10) + 1.5*r.NormFloat64())
		out[i] = int(min(max(s, 1<<10), 4<<20))
	}
	return out
}

// hitCounter tells reused buffers from new ones for any pool, including
// those that keep no statistics: it remembers, by weak pointer to the first
// byte, every buffer it saw Put, and a Get that returns one of them is a
// hit. Weak pointers keep no buffer alive and, unlike addresses, never
// mistake a new buffer that got a collected buffer's address for the old
// one. Its cost (a weak-pointer lookup per Get and Put, and an 8-byte handle
// per new buffer) is the same for every pool.
type hitCounter struct {
	seen       map[weak.Pointer[byte]]struct{}
	gets, hits uint64
}

func newHitCounter() *hitCounter {
	return &hitCounter{seen: make(map[weak.Pointer[byte]]struct{})}
}

func first(b *[]byte) *byte { return &(*b)[:1][0] }

func (h *hitCounter) got(b *[]byte) {
	h.gets++
	if _, ok := h.seen[weak.Make(first(b))]; ok {
		h.hits++
	}
}

func (h *hitCounter) putting(b *[]byte) {
	h.seen[weak.Make(first(b))] = struct{}{}
	if len(h.seen) > 1<<12 {
		for k := range h.seen {
			if k.Value() == nil {
				delete(h.seen, k)
			}
		}
	}
}

func (h *hitCounter) rate() float64 { return 100 * float64(h.hits) / float64(h.gets) }

// mixedPools are the pools that serve every size of the mixed workloads.
func mixedPools() []benchPool {
	var out []benchPool
	for _, p := range pools() {
		switch p.name {
		case "membuf-clearcap", "syncpool-clear":
			continue // the workloads measure retention and waste, not clearing
		}
		out = append(out, p)
	}
	return out
}

// BenchmarkMixedSizes runs a log-normal mix of sizes with 8 buffers in
// flight (each op Puts the oldest and Gets the next size). It reports the
// hit rate (Gets that did not allocate), the average extra capacity over
// the requested length (waste-%) and the worst seen (maxwaste-%).
func BenchmarkMixedSizes(b *testing.B) {
	sz := logNormalSizes(1 << 14)
	for _, p := range mixedPools() {
		b.Run("pool="+p.name, func(b *testing.B) {
			b.ReportAllocs()
			var ring [8]*[]byte
			var reqBytes, capBytes uint64
			var maxWaste float64
			h := newHitCounter()
			i := 0
			step := func() {
				slot := &ring[i%len(ring)]
				if *slot != nil {
					h.putting(*slot)
					p.put(*slot)
				}
				n := sz[i%len(sz)]
				buf := p.get(n)
				h.got(buf)
				*slot = buf
				reqBytes += uint64(n)
				capBytes += uint64(cap(*buf))
				maxWaste = max(maxWaste, float64(cap(*buf)-n)/float64(n))
				i++
			}
			for range len(sz) { // warm up: one pass over the sizes
				step()
			}
			h.gets, h.hits, reqBytes, capBytes, maxWaste = 0, 0, 0, 0, 0
			for b.Loop() {
				step()
			}
			b.ReportMetric(h.rate(), "hit-%")
			b.ReportMetric(100*float64(capBytes-reqBytes)/float64(reqBytes), "waste-%")
			b.ReportMetric(100*maxWaste, "maxwaste-%")
		})
	}
}

// BenchmarkGCPressure is a server between collections: each batch takes
// 64 buffers (log-normal sizes) and holds them all, as 64 concurrent
// requests would, then returns them; two forced garbage collections follow
// each batch (outside the timer), as a GC-bound server sees many between
// bursts. One op is one batch of 64 Gets and 64 Puts; hit-% is the share of
// Gets that reused a buffer. A sync.Pool survives one collection (victim
// cache), not two.
func BenchmarkGCPressure(b *testing.B) {
	sz := logNormalSizes(1 << 12)
	for _, p := range mixedPools() {
		b.Run("pool="+p.name, func(b *testing.B) {
			b.ReportAllocs()
			var held [64]*[]byte
			h := newHitCounter()
			i := 0
			batch := func() {
				for j := range held {
					held[j] = p.get(sz[i%len(sz)])
					h.got(held[j])
					i++
				}
				for j, buf := range held {
					h.putting(buf)
					p.put(buf)
					held[j] = nil
				}
			}
			// Warm up as the loop runs, collections included, so that the
			// hit rate is the steady state's, not the first batches' (in
			// which a membuf pool learns each class's reserve).
			for range 64 {
				batch()
				runtime.GC()
				runtime.GC()
			}
			h.gets, h.hits = 0, 0
			for b.Loop() {
				batch()
				b.StopTimer()
				runtime.GC()
				runtime.GC()
				b.StartTimer()
			}
			b.ReportMetric(h.rate(), "hit-%")
		})
	}
}

// TestHitCounter guards the hit counter the workloads rely on, with a pool
// that loses everything at once, as sync.Pool does at a GC. It uses a
// deterministic free list rather than a sync.Pool: under -race sync.Pool
// drops a random quarter of Puts, which would make the expected hit a coin
// toss.
func TestHitCounter(t *testing.T) {
	p := &listPool{}
	h := newHitCounter()
	b := p.Get(4096)
	h.got(b)
	h.putting(b)
	p.Put(b)
	b = p.Get(4096)
	h.got(b)
	if h.gets != 2 || h.hits != 1 {
		t.Fatalf("gets %d hits %d, want 2 and 1", h.gets, h.hits)
	}
	h.putting(b)
	p.Put(b)
	b = nil
	p.free = nil // lose everything
	runtime.GC()
	runtime.GC()
	for range 100 {
		b := p.Get(4096) // new, possibly at the old address
		h.got(b)
	}
	if h.hits != 1 {
		t.Fatalf("%d hits after the pool lost its buffers; new buffers counted as reused", h.hits)
	}
}

// listPool is a LIFO free list with no limit: the simplest pool that keeps
// everything it is given.
type listPool struct{ free []*[]byte }

func (p *listPool) Get(n int) *[]byte {
	if k := len(p.free); k > 0 {
		b := p.free[k-1]
		p.free = p.free[:k-1]
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

func (p *listPool) Put(b *[]byte) { p.free = append(p.free, b) }
