package membuf

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func fill(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

func TestBufferFreeReturnsToPoolOnce(t *testing.T) {
	pool := newTrackingPool(t)
	b := Alloc(pool, 100)
	if b.Len() != 100 || len(b.Bytes()) != 100 {
		t.Fatalf("Len %d, len(Bytes) %d; want 100", b.Len(), len(b.Bytes()))
	}
	b.Ref()
	b.Free()
	if pool.numOutstanding() != 1 {
		t.Fatal("buffer returned while a reference was held")
	}
	b.Free()
	if pool.numOutstanding() != 0 || pool.puts != 1 {
		t.Fatalf("after last Free: outstanding %d, puts %d; want 0, 1", pool.numOutstanding(), pool.puts)
	}
}

func TestNewBufferTakesOwnership(t *testing.T) {
	pool := newTrackingPool(t)
	p := pool.Get(10)
	copy(*p, "0123456789")
	b := NewBuffer(p, pool)
	if string(b.Bytes()) != "0123456789" {
		t.Fatalf("Bytes %q", b.Bytes())
	}
	b.Free()
	pool.checkAllReturned()

	// A nil pool returns nothing anywhere.
	data := []byte("abc")
	b = NewBuffer(&data, nil)
	if string(b.Bytes()) != "abc" {
		t.Fatalf("Bytes %q", b.Bytes())
	}
	b.Free()
}

func TestAllocNilPool(t *testing.T) {
	b := Alloc(nil, 7)
	if b.Len() != 7 {
		t.Fatalf("Len %d", b.Len())
	}
	b.Free()
}

func TestZeroBuffer(t *testing.T) {
	var b Buffer
	if !b.IsZero() || b.Len() != 0 || b.Bytes() != nil {
		t.Fatal("zero Buffer is not empty")
	}
	b.Ref()
	b.Free()
	b.Free()
	if r := b.Split(0); !r.IsZero() {
		t.Fatal("Split(0) of zero Buffer is not zero")
	}
	if s := b.Slice(0, 0); !s.IsZero() {
		t.Fatal("Slice(0,0) of zero Buffer is not zero")
	}
	mustPanicWith(t, func() { b.Split(1) }, "membuf: Split(1) of empty buffer")
	mustPanicWith(t, func() { b.Slice(0, 1) }, "membuf: Slice(0, 1) of empty buffer")
	if Wrap(nil).IsZero() {
		t.Fatal("Wrap(nil) is the zero Buffer; want a real (empty) buffer")
	}
}

func TestSplitAndSliceKeepRootAlive(t *testing.T) {
	pool := newTrackingPool(t)
	b := Alloc(pool, 10)
	fill(b.Bytes(), 'a')
	right := b.Split(4)
	mid := right.Slice(1, 3)
	if got := string(b.Bytes()); got != "abcd" {
		t.Fatalf("left %q", got)
	}
	if got := string(right.Bytes()); got != "efghij" {
		t.Fatalf("right %q", got)
	}
	if got := string(mid.Bytes()); got != "fg" {
		t.Fatalf("mid %q", got)
	}
	// The left part cannot grow into the right one.
	if cap(b.Bytes()) != 4 {
		t.Fatalf("cap(left) = %d; want 4", cap(b.Bytes()))
	}
	b.Free()
	right.Free()
	if pool.numOutstanding() != 1 {
		t.Fatal("memory returned while a slice view was alive")
	}
	if got := string(mid.Bytes()); got != "fg" {
		t.Fatalf("mid after freeing the others %q", got)
	}
	mid.Free()
	pool.checkAllReturned()
}

func TestSplitBounds(t *testing.T) {
	b := Wrap([]byte("hello"))
	defer b.Free()
	for _, n := range []int{-1, 6} {
		mustPanicWith(t, func() { b.Split(n) }, "out of range for buffer of length 5")
	}
	r := b.Split(5)
	if r.Len() != 0 || b.Len() != 5 {
		t.Fatalf("Split(len): %d, %d", b.Len(), r.Len())
	}
	r.Free()
	r = b.Split(0)
	if r.Len() != 5 || b.Len() != 0 {
		t.Fatalf("Split(0): %d, %d", b.Len(), r.Len())
	}
	r.Free()
}

func TestSliceBounds(t *testing.T) {
	b := Wrap([]byte("hello"))
	defer b.Free()
	for _, c := range [][2]int{{-1, 2}, {3, 2}, {0, 6}} {
		mustPanicWith(t, func() { b.Slice(c[0], c[1]) }, "out of range for buffer of length 5")
	}
	s := b.Slice(0, 5)
	s.Split(2).Free() // a full-length slice is its own view
	if b.Len() != 5 {
		t.Fatal("splitting a slice changed the original")
	}
	s.Free()
}

func TestSplitOfSharedBufferPanics(t *testing.T) {
	b := Wrap([]byte("hello"))
	b.Ref()
	mustPanicWith(t, func() { b.Split(2) }, "membuf: Split of a shared buffer (2 references)")
	b.Free()
	b.Split(2).Free()
	b.Free()
}

// staleAndRecycled returns a freed handle whose header has been reused for
// the live buffer fresh, which the caller must free. Debug mode never
// recycles headers, so it is off for the test.
func staleAndRecycled(t *testing.T, pool BufferPool) (stale, fresh Buffer) {
	t.Helper()
	SetDebugEnv(t, false)
	var others []Buffer
	defer func() {
		for _, o := range others {
			o.Free()
		}
	}()
	// sync.Pool hands back the header just put on the same P, unless the
	// goroutine moved to another P in between or the race detector dropped
	// the Put (a quarter of them); so try again with a fresh header.
	for range 100 {
		stale = Alloc(pool, 8)
		stale.Free()
		for range 10 {
			b := Alloc(pool, 8)
			if b.h == stale.h {
				return stale, b
			}
			others = append(others, b)
		}
	}
	t.Fatal("a freed header was never recycled in 100 tries")
	return
}

func TestMisusePanics(t *testing.T) {
	ops := []struct {
		name string
		op   func(Buffer)
		want string
	}{
		{"Free", Buffer.Free, "membuf: double free of buffer (header 0x"},
		{"Ref", Buffer.Ref, "membuf: Ref of freed buffer (header 0x"},
		{"Bytes", func(b Buffer) { b.Bytes() }, "membuf: use of freed buffer in Bytes"},
		{"Len", func(b Buffer) { b.Len() }, "membuf: use of freed buffer in Len"},
		{"Split", func(b Buffer) { b.Split(1) }, "membuf: use of freed buffer in Split"},
		{"Slice", func(b Buffer) { b.Slice(0, 1) }, "membuf: use of freed buffer in Slice"},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			pool := newTrackingPool(t)
			b := Alloc(pool, 8)
			b.Free()
			msg := mustPanicWith(t, func() { op.op(b) }, op.want)
			if !strings.Contains(msg, "length 8") {
				t.Errorf("message %q does not give the buffer's length", msg)
			}
			pool.checkAllReturned()
		})
		t.Run(op.name+"/child", func(t *testing.T) {
			pool := newTrackingPool(t)
			b := Alloc(pool, 8)
			c := b.Slice(2, 5)
			b.Free()
			c.Free()
			mustPanicWith(t, func() { op.op(c) }, op.want)
			pool.checkAllReturned()
		})
		t.Run(op.name+"/copy", func(t *testing.T) {
			// Freeing one copy of a handle makes every copy stale.
			b := Wrap(make([]byte, 8))
			c := b
			b.Free()
			mustPanicWith(t, func() { op.op(c) }, op.want)
		})
		t.Run(op.name+"/recycled", func(t *testing.T) {
			pool := newTrackingPool(t)
			stale, fresh := staleAndRecycled(t, pool)
			fill(fresh.Bytes(), 1)
			mustPanicWith(t, func() { op.op(stale) }, op.want)
			// The misuse left the header's new life alone.
			if n, ok := fresh.h.refs.count(fresh.gen); !ok || n != 1 {
				t.Fatalf("fresh buffer: %d refs, live %v; want 1, true", n, ok)
			}
			if !bytes.Equal(fresh.Bytes(), fill(make([]byte, 8), 1)) {
				t.Fatal("fresh buffer's contents changed")
			}
			fresh.Free()
			pool.checkAllReturned()
		})
	}
}

func TestRootStaysStaleWhileChildLives(t *testing.T) {
	// The root header outlives its last reference while a child holds the
	// memory; a stale handle to it must not be taken for live.
	pool := newTrackingPool(t)
	b := Alloc(pool, 8)
	r := b.Split(4)
	b.Free()
	mustPanicWith(t, func() { b.Free() }, "double free")
	mustPanicWith(t, func() { b.Ref() }, "Ref of freed buffer")
	if pool.numOutstanding() != 1 {
		t.Fatal("memory returned with a child alive")
	}
	r.Free()
	pool.checkAllReturned()
}

func TestConcurrentRefFree(t *testing.T) {
	pool := newTrackingPool(t)
	b := Alloc(pool, 1024)
	fill(b.Bytes(), 3)
	want := fill(make([]byte, 1024), 3)
	const goroutines, rounds = 16, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		b.Ref() // one reference per goroutine, handed over
		wg.Go(func() {
			defer b.Free()
			for i := range rounds {
				b.Ref()
				s := b.Slice(g, 1024-i%512)
				if s.Bytes()[0] != want[g] {
					t.Error("wrong contents")
				}
				s.Free()
				b.Free()
			}
		})
	}
	wg.Wait()
	if pool.numOutstanding() != 1 {
		t.Fatal("returned early")
	}
	b.Free()
	pool.checkAllReturned()
}

func TestSplitSliceFreeAllocatesNothing(t *testing.T) {
	skipUnderRace(t, "the race detector makes sync.Pool drop headers, which allocates")
	SetDebugEnv(t, false) // debug mode records stacks: it allocates by design
	pool := &lifoTestPool{}
	run := func() {
		b := Alloc(pool, 32<<10)
		r := b.Split(16 << 10)
		s := r.Slice(10, 100)
		b.Free()
		r.Free()
		s.Free()
	}
	run()
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Fatalf("Alloc, Split, Slice and Free: %v allocations per run; want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { Wrap(nil).Free() }); n != 0 {
		t.Fatalf("Wrap and Free: %v allocations per run; want 0", n)
	}
}

// collectReports installs a reporter for the test and returns the channel it
// sends reports on.
func collectReports(t *testing.T) <-chan Report {
	ch := make(chan Report, 16)
	prev := SetReporter(func(r Report) {
		select {
		case ch <- r:
		default:
		}
	})
	t.Cleanup(func() { SetReporter(prev) })
	return ch
}

//go:noinline
func leakAPooledBuffer(pool BufferPool) {
	b := Alloc(pool, 64)
	b.Bytes()[0] = 1
}

func TestDebugReportsLeakWithTakingFunction(t *testing.T) {
	SetDebugEnv(t, true)
	reports := collectReports(t)
	leakAPooledBuffer(newTrackingPool(t))
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case r := <-reports:
			if r.Kind != ReportLeak {
				t.Fatalf("report kind %v; want leak", r.Kind)
			}
			if !strings.Contains(r.Taken, "membuf.leakAPooledBuffer") {
				t.Fatalf("leak report does not name the leaking function; taken at:\n%s", r.Taken)
			}
			if !strings.Contains(r.String(), "membuf: leak: buffer garbage-collected without being freed") {
				t.Fatalf("report text %q", r.String())
			}
			return
		case <-deadline:
			t.Fatal("no leak report after 10s of GCs")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestDebugFreedBufferIsNotReportedAsLeak(t *testing.T) {
	SetDebugEnv(t, true)
	reports := collectReports(t)
	func() {
		b := Alloc(newTrackingPool(t), 64)
		b.Split(10).Free()
		b.Free()
	}()
	for range 5 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-reports:
		t.Fatalf("unexpected report: %v", r)
	default:
	}
}

//go:noinline
func takeForDebug() Buffer { return Alloc(nil, 16) }

//go:noinline
func firstFree(b Buffer) { b.Free() }

func TestDebugDoubleFreeHasBothStacks(t *testing.T) {
	SetDebugEnv(t, true)
	reports := collectReports(t)
	b := takeForDebug()
	firstFree(b)
	msg := mustPanicWith(t, func() { b.Free() },
		"membuf: double free of buffer (header 0x", "length 16",
		"taken at:\n", "membuf.takeForDebug", "first freed at:\n", "membuf.firstFree")
	if strings.Index(msg, "takeForDebug") > strings.Index(msg, "first freed at") {
		t.Fatalf("stacks out of order:\n%s", msg)
	}
	select {
	case r := <-reports:
		if r.Kind != ReportDoubleFree || !strings.Contains(r.Taken, "takeForDebug") || !strings.Contains(r.Freed, "firstFree") {
			t.Fatalf("report %+v", r)
		}
	default:
		t.Fatal("no double-free report")
	}
	// Use after free names the stacks too.
	mustPanicWith(t, func() { b.Bytes() }, "use of freed buffer in Bytes", "membuf.takeForDebug", "membuf.firstFree")
}

func TestDebugFromPoolDebugSwitch(t *testing.T) {
	// A *Pool in debug mode puts its buffers in debug mode without the
	// environment variable.
	SetDebugEnv(t, false)
	p, err := NewPool(Config{Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	b := Alloc(p, 16)
	if b.h.dbg == nil {
		t.Fatal("buffer from a debug pool is not in debug mode")
	}
	c := b.Slice(1, 2)
	if c.h.dbg == nil {
		t.Fatal("child of a debug buffer is not in debug mode")
	}
	c.Free()
	b.Free()
	plain, err := NewPool(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if b := Alloc(plain, 16); b.h.dbg != nil {
		t.Fatal("buffer from a plain pool is in debug mode")
	} else {
		b.Free()
	}
}

// TestDebugEnvSwitch runs this test binary again with MEMBUF_DEBUG set and
// checks that it reports a leak: the switch works without recompiling.
func TestDebugEnvSwitch(t *testing.T) {
	if os.Getenv("MEMBUF_TEST_CHILD") == "1" {
		if !debugFromEnv {
			t.Fatal("MEMBUF_DEBUG=1 did not turn debug mode on")
		}
		reports := collectReports(t)
		leakAPooledBuffer(nil)
		for range 500 {
			runtime.GC()
			select {
			case r := <-reports:
				os.Stdout.WriteString("REPORT " + r.Kind.String() + "\n" + r.Taken)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Fatal("no report")
	}
	if testing.Short() {
		t.Skip("runs a subprocess")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDebugEnvSwitch$", "-test.v")
	cmd.Env = append(os.Environ(), "MEMBUF_TEST_CHILD=1", DebugEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "REPORT leak") || !strings.Contains(string(out), "leakAPooledBuffer") {
		t.Fatalf("child output:\n%s", out)
	}
}
