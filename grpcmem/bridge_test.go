package grpcmem

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/internal/testenv"
	"google.golang.org/grpc/mem"
)

func fill(b []byte, seed byte) []byte {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestToGRPCPassesReferenceAndReleasesOnce(t *testing.T) {
	pool := newCountingPool(t, 0)
	b := membuf.Alloc(pool, 4096)
	fill(b.Bytes(), 1)
	want := bytes.Clone(b.Bytes())
	gb := ToGRPC(b)
	if &gb.ReadOnlyData()[0] != &b.Bytes()[0] {
		t.Fatal("ToGRPC copied a 4 KiB buffer; want the same memory")
	}
	// grpc-go views: a full Ref, a Slice, and a split.
	gb.Ref()
	view := gb.Slice(10, 2000)
	left, right := mem.SplitUnsafe(gb, 100)
	pool.freeInTurn(left.Free, right.Free, gb.Free) // view still holds it
	if !bytes.Equal(view.ReadOnlyData(), want[10:2000]) {
		t.Fatal("grpc view does not show the membuf bytes")
	}
	view.Free()
	pool.check()
}

func TestToGRPCShortRootWithLargeCapacityIsByReference(t *testing.T) {
	pool := newCountingPool(t, 4096) // every slice has 4 KiB of capacity
	b := membuf.Alloc(pool, 100)
	fill(b.Bytes(), 3)
	gb := ToGRPC(b)
	if _, copied := gb.(mem.SliceBuffer); copied {
		t.Fatal("a 100-byte buffer with 4 KiB capacity was copied; grpc-go pools it by capacity")
	}
	pool.freeInTurn(gb.Free)
	pool.check()
}

func TestToGRPCSmallViewIsCopiedAndReleasedAtOnce(t *testing.T) {
	pool := newCountingPool(t, 0)
	root := membuf.Alloc(pool, 4096)
	fill(root.Bytes(), 5)
	want := bytes.Clone(root.Bytes()[50:150])
	view := root.Slice(50, 150) // capacity 100: grpc-go would not count references
	root.Free()
	gb := ToGRPC(view)
	if pool.outstanding() != 0 {
		t.Fatal("small buffer: membuf reference not released at once; grpc-go never calls Put for it")
	}
	if _, ok := gb.(mem.SliceBuffer); !ok {
		t.Fatalf("small buffer: got %T, want a mem.SliceBuffer copy", gb)
	}
	if !bytes.Equal(gb.ReadOnlyData(), want) {
		t.Fatal("small buffer: copy differs")
	}
	gb.Free()
	pool.check()
}

func TestToGRPCZeroAndEmpty(t *testing.T) {
	if n := ToGRPC(membuf.Buffer{}).Len(); n != 0 {
		t.Fatalf("zero Buffer: Len %d", n)
	}
	pool := newCountingPool(t, 0)
	b := membuf.Alloc(pool, 4096)
	empty := b.Slice(0, 0)
	b.Free()
	ToGRPC(empty).Free()
	pool.check()
}

func TestFromGRPCPassesReferenceAndReleasesOnce(t *testing.T) {
	pool := newCountingPool(t, 0)
	raw := pool.Get(8192)
	fill(*raw, 9)
	want := bytes.Clone(*raw)
	gb := mem.NewBuffer(raw, pool)
	b := FromGRPC(gb)
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("contents differ")
	}
	if &b.Bytes()[0] != &(*raw)[0] {
		t.Fatal("FromGRPC copied; want the same memory")
	}
	right := b.Split(4096)
	mid := right.Slice(10, 20)
	b.Ref()
	pool.freeInTurn(b.Free, b.Free, right.Free) // mid still holds it
	if !bytes.Equal(mid.Bytes(), want[4096+10:4096+20]) {
		t.Fatal("membuf view does not show the grpc bytes")
	}
	mid.Free()
	pool.check()
}

func TestFromGRPCSplitBuffers(t *testing.T) {
	// A received message often arrives as parts of one pooled frame: grpc-go
	// splits its buffers (child views that hold a reference on the root).
	for _, order := range [][3]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {1, 2, 0}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) { testFromGRPCSplitBuffers(t, order) })
	}
}

func testFromGRPCSplitBuffers(t *testing.T, order [3]int) {
	pool := newCountingPool(t, 0)
	raw := pool.Get(16384)
	fill(*raw, 11)
	want := bytes.Clone(*raw)
	gb := mem.NewBuffer(raw, pool)
	a, rest := mem.SplitUnsafe(gb, 1000)
	bb, c := mem.SplitUnsafe(rest, 5000)
	parts := []membuf.Buffer{FromGRPC(a), FromGRPC(bb), FromGRPC(c)}
	got := append(append(append([]byte(nil), parts[0].Bytes()...), parts[1].Bytes()...), parts[2].Bytes()...)
	if !bytes.Equal(got, want) {
		t.Fatal("contents differ")
	}
	pool.freeInTurn(parts[order[0]].Free, parts[order[1]].Free, parts[order[2]].Free)
	pool.check()
}

func TestFromGRPCSliceBufferIsWrapped(t *testing.T) {
	data := fill(make([]byte, 500), 13)
	b := FromGRPC(mem.SliceBuffer(data))
	if &b.Bytes()[0] != &data[0] {
		t.Fatal("SliceBuffer was copied")
	}
	b.Free()
	if !FromGRPC(mem.SliceBuffer(nil)).IsZero() {
		t.Fatal("empty SliceBuffer: want the zero Buffer")
	}
}

func TestRoundTripsReleaseOnce(t *testing.T) {
	mpool := newCountingPool(t, 0)
	b := membuf.Alloc(mpool, 3000)
	back := FromGRPC(ToGRPC(b))
	again := ToGRPC(back)
	again.Free()
	mpool.check()

	gpool := newCountingPool(t, 0)
	gb := mem.NewBuffer(gpool.Get(3000), gpool)
	gback := ToGRPC(FromGRPC(gb))
	FromGRPC(gback).Free()
	gpool.check()
}

func TestSlices(t *testing.T) {
	pool := newCountingPool(t, 0)
	var s membuf.Slice
	var want []byte
	for i, n := range []int{5000, 0, 2048, 100} {
		b := membuf.Alloc(pool, n)
		fill(b.Bytes(), byte(i))
		want = append(want, b.Bytes()...)
		s = append(s, b)
	}
	gs := ToGRPCSlice(s)
	if !bytes.Equal(gs.Materialize(), want) {
		t.Fatal("ToGRPCSlice: contents differ")
	}
	back := FromGRPCSlice(gs)
	if got := back.Len(); got != len(want) {
		t.Fatalf("FromGRPCSlice: Len %d, want %d", got, len(want))
	}
	got := make([]byte, len(want))
	back.CopyTo(got)
	if !bytes.Equal(got, want) {
		t.Fatal("FromGRPCSlice: contents differ")
	}
	back.Free()
	pool.check()
}

func TestBridgeAllocatesNothing(t *testing.T) {
	testenv.SkipUnlessAllocationsCount(t)
	pool := newCountingPool(t, 0)
	raw := pool.Get(1 << 16)
	gpool := newCountingPool(t, 0)
	graw := gpool.Get(1 << 16)
	for name, f := range map[string]func(){
		"ToGRPC": func() {
			b := membuf.NewBuffer(raw, nil) // nil pool: the memory stays ours
			ToGRPC(b).Free()
		},
		"FromGRPC": func() {
			gb := mem.NewBuffer(graw, noPutPool{})
			FromGRPC(gb).Free()
		},
		"FromGRPC-split": func() {
			gb := mem.NewBuffer(graw, noPutPool{})
			l, r := mem.SplitUnsafe(gb, 100)
			a, b := FromGRPC(l), FromGRPC(r)
			a.Free()
			b.Free()
		},
	} {
		f() // warm the recycled headers and adapters
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per buffer, want 0", name, n)
		}
	}
}

// noPutPool is a grpc-go pool whose Put keeps nothing.
type noPutPool struct{}

func (noPutPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (noPutPool) Put(*[]byte)       {}

func BenchmarkToGRPC(b *testing.B) {
	for _, n := range []int{512, 1024, 1025, 16 << 10} {
		b.Run(sizeName(n), func(b *testing.B) {
			data := make([]byte, n) // capacity n: the small cases take the copy path
			b.ReportAllocs()
			for b.Loop() {
				ToGRPC(membuf.Wrap(data)).Free()
			}
		})
	}
}

func BenchmarkFromGRPC(b *testing.B) {
	data := make([]byte, 16<<10)
	b.ReportAllocs()
	for b.Loop() {
		FromGRPC(mem.NewBuffer(&data, noPutPool{})).Free()
	}
}

func sizeName(n int) string {
	if n%1024 == 0 {
		return itoa(n/1024) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
