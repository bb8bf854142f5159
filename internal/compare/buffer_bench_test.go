package compare

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/membuf/membuf"
	"google.golang.org/grpc/mem"
)

// Buffer benchmarks: membuf.Buffer against grpc-go v1.85 mem.Buffer, side
// by side in one run. Sub-benchmark names carry impl=..., so that
//
//	benchstat -col /impl old.txt
//
// prints the implementations as columns with ratios. See
// docs/benchmarks.md ("Buffers") for the commands and results.

const splitSize = 32 << 10

// membufPool returns a default membuf.Pool (4 classes per doubling, 256 B to
// 4 MiB, ClearLength, 64 MiB budget), made once per process.
var membufPool = sync.OnceValue(func() *membuf.Pool { return newPool(membuf.Config{}) })

// membufNoClearPool is a membuf.Pool that hands reused buffers out as they
// are (ClearNone), for callers that overwrite what they read.
var membufNoClearPool = sync.OnceValue(func() *membuf.Pool {
	return newPool(membuf.Config{Clearing: membuf.ClearNone, Budget: 256 << 20})
})

// membufDebugPool is a membuf.Pool in debug mode: stacks recorded on every
// take and free, leak cleanups, poisoning.
var membufDebugPool = sync.OnceValue(func() *membuf.Pool { return newPool(membuf.Config{Debug: true}) })

func newPool(c membuf.Config) *membuf.Pool {
	p, err := membuf.NewPool(c)
	if err != nil {
		panic(err)
	}
	return p
}

// BenchmarkBufferSplitFree is grpc-go PR 8784's split benchmark: take 32 KiB
// from a pool, wrap it, split it in half, free both halves.
func BenchmarkBufferSplitFree(b *testing.B) {
	b.Run("impl=grpc", func(b *testing.B) {
		pool := mem.DefaultBufferPool()
		for b.Loop() {
			buf := mem.NewBuffer(pool.Get(splitSize), pool)
			left, right := mem.SplitUnsafe(buf, splitSize/2)
			left.Free()
			right.Free()
		}
	})
	membufSplit := func(pool membuf.BufferPool) func(*testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				left := membuf.Alloc(pool, splitSize)
				right := left.Split(splitSize / 2)
				left.Free()
				right.Free()
			}
		}
	}
	b.Run("impl=membuf", membufSplit(membufPool()))
	b.Run("impl=membuf-noclear", membufSplit(membufNoClearPool()))
	// The same membuf code over grpc-go's pool: separates the buffer
	// header's cost from the pool's.
	b.Run("impl=membuf-grpcpool", membufSplit(mem.DefaultBufferPool()))
	b.Run("impl=membuf-debug", membufSplit(membufDebugPool()))
}

// BenchmarkBufferFree is the same without the split: take, wrap, free.
func BenchmarkBufferFree(b *testing.B) {
	b.Run("impl=grpc", func(b *testing.B) {
		pool := mem.DefaultBufferPool()
		for b.Loop() {
			mem.NewBuffer(pool.Get(splitSize), pool).Free()
		}
	})
	membufFree := func(pool membuf.BufferPool) func(*testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				membuf.Alloc(pool, splitSize).Free()
			}
		}
	}
	b.Run("impl=membuf", membufFree(membufPool()))
	b.Run("impl=membuf-noclear", membufFree(membufNoClearPool()))
	b.Run("impl=membuf-grpcpool", membufFree(mem.DefaultBufferPool()))
	b.Run("impl=membuf-debug", membufFree(membufDebugPool()))
}

// BenchmarkBufferSlice takes 32 KiB, makes a view of a part of it with
// Slice, and frees both.
func BenchmarkBufferSlice(b *testing.B) {
	b.Run("impl=grpc", func(b *testing.B) {
		pool := mem.DefaultBufferPool()
		for b.Loop() {
			buf := mem.NewBuffer(pool.Get(splitSize), pool)
			view := buf.Slice(1024, splitSize/2)
			buf.Free()
			view.Free()
		}
	})
	membufSlice := func(pool membuf.BufferPool) func(*testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				buf := membuf.Alloc(pool, splitSize)
				view := buf.Slice(1024, splitSize/2)
				buf.Free()
				view.Free()
			}
		}
	}
	b.Run("impl=membuf", membufSlice(membufPool()))
	b.Run("impl=membuf-noclear", membufSlice(membufNoClearPool()))
	b.Run("impl=membuf-grpcpool", membufSlice(mem.DefaultBufferPool()))
	b.Run("impl=membuf-debug", membufSlice(membufDebugPool()))
}

// BenchmarkBufferSplitOnly isolates the buffer operations from the pool:
// wrap a plain slice (nothing to return), split it, free both.
func BenchmarkBufferSplitOnly(b *testing.B) {
	data := make([]byte, splitSize)
	b.Run("impl=grpc", func(b *testing.B) {
		// mem.NewBuffer with a nil pool returns an unreferenced SliceBuffer,
		// so use a pool that returns nothing.
		// The *[]byte is made once, outside the loop, so that grpc-go is not
		// charged for boxing the slice.
		var pool nopPool
		d := data
		for b.Loop() {
			buf := mem.NewBuffer(&d, pool)
			left, right := mem.SplitUnsafe(buf, splitSize/2)
			left.Free()
			right.Free()
		}
	})
	b.Run("impl=membuf", func(b *testing.B) {
		for b.Loop() {
			left := membuf.Wrap(data)
			right := left.Split(splitSize / 2)
			left.Free()
			right.Free()
		}
	})
}

type nopPool struct{}

func (nopPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (nopPool) Put(*[]byte)       {}

var readAllSizes = []struct {
	name string
	n    int
}{
	{"1MiB", 1 << 20},
	{"64MiB", 64 << 20},
}

// readAllData is the payload for the ReadAll benchmarks, made once.
var readAllData = sync.OnceValue(func() []byte {
	b := make([]byte, 64<<20)
	x := uint64(88172645463325252)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
})

type readAllImpl struct {
	name string
	// run reads all of r and frees what it read.
	run func(b *testing.B, r io.Reader)
}

func readAllImpls() []readAllImpl {
	noClear := membufNoClearPool()
	return []readAllImpl{
		{"io", func(b *testing.B, r io.Reader) {
			if _, err := io.ReadAll(r); err != nil {
				b.Fatal(err)
			}
		}},
		{"grpc", func(b *testing.B, r io.Reader) {
			s, err := mem.ReadAll(r, mem.DefaultBufferPool())
			if err != nil {
				b.Fatal(err)
			}
			s.Free()
		}},
		{"membuf", func(b *testing.B, r io.Reader) {
			s, err := membuf.ReadAll(r, membufPool(), 0)
			if err != nil {
				b.Fatal(err)
			}
			s.Free()
		}},
		// A pool that does not clear reused buffers: ReadAll overwrites
		// every byte it exposes, so clearing is wasted work here.
		{"membuf-noclear", func(b *testing.B, r io.Reader) {
			s, err := membuf.ReadAll(r, noClear, 0)
			if err != nil {
				b.Fatal(err)
			}
			s.Free()
		}},
	}
}

// BenchmarkReadAllBytesReader reads 1 MiB and 64 MiB from a bytes.Reader
// (known size: Len) into pooled buffers and frees them.
func BenchmarkReadAllBytesReader(b *testing.B) {
	for _, size := range readAllSizes {
		data := readAllData()[:size.n]
		for _, impl := range readAllImpls() {
			b.Run("size="+size.name+"/impl="+impl.name, func(b *testing.B) {
				r := bytes.NewReader(data)
				b.SetBytes(int64(size.n))
				for b.Loop() {
					r.Reset(data)
					impl.run(b, r)
				}
			})
		}
	}
}

// BenchmarkReadAllFile reads a 1 MiB and a 64 MiB file (known size: Stat)
// from a temporary directory (the page cache, after the first read) into
// pooled buffers and frees them.
func BenchmarkReadAllFile(b *testing.B) {
	dir := b.TempDir()
	for _, size := range readAllSizes {
		path := filepath.Join(dir, size.name)
		if err := os.WriteFile(path, readAllData()[:size.n], 0o600); err != nil {
			b.Fatal(err)
		}
		for _, impl := range readAllImpls() {
			b.Run("size="+size.name+"/impl="+impl.name, func(b *testing.B) {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				b.SetBytes(int64(size.n))
				for b.Loop() {
					if _, err := f.Seek(0, io.SeekStart); err != nil {
						b.Fatal(err)
					}
					impl.run(b, f)
				}
			})
		}
	}
}
