package grpcmem

import (
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/internal/syncpool"
	"google.golang.org/grpc/mem"
)

// The bridge hands each side's buffer to the other side's constructor
// together with a small adapter as the "pool": both grpc-go's mem.NewBuffer
// and membuf.NewBuffer call pool.Put(data) exactly once, when the last
// reference (and view) of the new buffer is released, and the adapter's Put
// releases the reference it holds on the original. The adapters carry the
// []byte that the constructor takes a pointer to, and are recycled through a
// sync.Pool, so a conversion allocates nothing in the steady state.

// toGRPCAdapter is the mem.BufferPool of a grpc buffer made by ToGRPC.
type toGRPCAdapter struct {
	data []byte // &data is the *[]byte handed to mem.NewBuffer
	buf  membuf.Buffer
}

var toGRPCAdapters = syncpool.New(func() *toGRPCAdapter { return new(toGRPCAdapter) })

// Get is never called: grpc-go only calls Put on the pool of a buffer made
// by mem.NewBuffer (grpc mem/buffers.go, (*buffer).Free).
func (a *toGRPCAdapter) Get(int) *[]byte {
	panic("grpcmem: Get called on the adapter of a bridged buffer")
}

// Put runs when grpc-go frees the last reference to the bridged buffer (and
// to every view split or sliced from it); it releases the membuf reference.
func (a *toGRPCAdapter) Put(*[]byte) {
	b := a.buf
	a.buf = membuf.Buffer{}
	a.data = nil
	toGRPCAdapters.Put(a)
	b.Free()
}

// ToGRPC returns a grpc-go buffer viewing b's bytes and takes over the
// reference the caller holds on b: the caller must not use or free b
// afterwards, and when gRPC (or whoever holds the result) frees the last
// reference to the result, and to every view made from it, b is freed. The
// bytes are not copied, and nothing is allocated in the steady state.
//
// The one exception is memory grpc-go will not reference-count: mem.NewBuffer
// returns a plain mem.SliceBuffer, and never calls the pool back, when the
// capacity of the slice is 1 KiB or less (mem.IsBelowBufferPoolingThreshold).
// Such a buffer would hold b forever, so ToGRPC copies its bytes into a new
// mem.SliceBuffer and frees b at once: two small allocations (the bytes and
// the interface box) and a copy of at most 1 KiB. The capacity, not the
// length, decides, as it does in grpc-go: a short root buffer taken from a
// pool class above 1 KiB is still passed by reference; short views made by
// Slice, or the left part of a Split (which cap their capacity at their
// length), are copied.
//
// The zero Buffer gives an empty mem.SliceBuffer.
func ToGRPC(b membuf.Buffer) mem.Buffer {
	if b.IsZero() {
		return mem.SliceBuffer(nil)
	}
	data := b.Bytes()
	if mem.IsBelowBufferPoolingThreshold(cap(data)) {
		return copySmall(b, data)
	}
	a := toGRPCAdapters.Get()
	a.data = data
	a.buf = b
	gb := mem.NewBuffer(&a.data, a)
	if _, unpooled := gb.(mem.SliceBuffer); unpooled {
		// Only if grpc-go's threshold moved: it will never call Put.
		a.data, a.buf = nil, membuf.Buffer{}
		toGRPCAdapters.Put(a)
		return copySmall(b, data)
	}
	return gb
}

func copySmall(b membuf.Buffer, data []byte) mem.Buffer {
	var c mem.SliceBuffer
	if len(data) > 0 {
		c = make(mem.SliceBuffer, len(data))
		copy(c, data)
	}
	b.Free()
	return c
}

// fromGRPCAdapter is the membuf.BufferPool of a membuf buffer made by
// FromGRPC.
type fromGRPCAdapter struct {
	data []byte // &data is the *[]byte handed to membuf.NewBuffer
	buf  mem.Buffer
}

var fromGRPCAdapters = syncpool.New(func() *fromGRPCAdapter { return new(fromGRPCAdapter) })

// Get is never called: membuf only calls Put on the pool of a buffer made by
// membuf.NewBuffer.
func (a *fromGRPCAdapter) Get(int) *[]byte {
	panic("grpcmem: Get called on the adapter of a bridged buffer")
}

// Put runs when the last view of the bridged membuf buffer is freed; it
// releases the grpc-go reference.
func (a *fromGRPCAdapter) Put(*[]byte) {
	b := a.buf
	a.buf = nil
	a.data = nil
	fromGRPCAdapters.Put(a)
	b.Free()
}

// FromGRPC returns a membuf buffer viewing gb's bytes and takes over the
// reference the caller holds on gb: the caller must not use or free gb
// afterwards, and when the returned buffer and every view split or sliced
// from it have been freed, gb is freed. The bytes are not copied, and nothing
// is allocated in the steady state.
//
// A mem.SliceBuffer holds no reference (its Free does nothing) and views
// memory no pool will reuse, so it is wrapped with [membuf.Wrap]; an empty
// buffer gives the zero Buffer.
func FromGRPC(gb mem.Buffer) membuf.Buffer {
	if sb, ok := gb.(mem.SliceBuffer); ok {
		if len(sb) == 0 {
			return membuf.Buffer{}
		}
		return membuf.Wrap(sb)
	}
	data := gb.ReadOnlyData()
	if len(data) == 0 {
		gb.Free()
		return membuf.Buffer{}
	}
	return fromGRPCRef(gb, data)
}

// fromGRPCRef returns a membuf buffer viewing data, which lies within the
// memory of gb, and takes over the caller's reference on gb.
func fromGRPCRef(gb mem.Buffer, data []byte) membuf.Buffer {
	a := fromGRPCAdapters.Get()
	a.data = data
	a.buf = gb
	return membuf.NewBuffer(&a.data, a)
}

// ToGRPCSlice converts each buffer of s with [ToGRPC], taking over the
// caller's reference on each. It allocates the returned slice; see
// [AppendToGRPC] to reuse one.
func ToGRPCSlice(s membuf.Slice) mem.BufferSlice {
	return AppendToGRPC(make(mem.BufferSlice, 0, len(s)), s)
}

// AppendToGRPC converts each buffer of s with [ToGRPC], taking over the
// caller's reference on each, and appends the results to dst. Empty buffers
// are dropped.
func AppendToGRPC(dst mem.BufferSlice, s membuf.Slice) mem.BufferSlice {
	for _, b := range s {
		if b.Len() == 0 {
			b.Free()
			continue
		}
		dst = append(dst, ToGRPC(b))
	}
	return dst
}

// FromGRPCSlice converts each buffer of s with [FromGRPC], taking over the
// caller's reference on each. It allocates the returned slice; see
// [AppendFromGRPC] to reuse one.
func FromGRPCSlice(s mem.BufferSlice) membuf.Slice {
	return AppendFromGRPC(make(membuf.Slice, 0, len(s)), s)
}

// AppendFromGRPC converts each buffer of s with [FromGRPC], taking over the
// caller's reference on each, and appends the results to dst. Empty buffers
// are dropped.
func AppendFromGRPC(dst membuf.Slice, s mem.BufferSlice) membuf.Slice {
	for _, gb := range s {
		b := FromGRPC(gb)
		if b.IsZero() {
			continue
		}
		dst = append(dst, b)
	}
	return dst
}
