package membuf

import "net"

// A Slice is a scatter-gather list of buffers: data that spans one or more
// [Buffer]s, in order. Its methods act on every buffer in it. A Slice is a
// plain slice of handles: copying it copies the handles, not references, and
// the built-in len counts buffers, not bytes (use [Slice.Len]).
//
// Whoever holds a Slice owns one reference to each buffer in it unless a
// function's documentation says otherwise, and releases them with
// [Slice.Free].
type Slice []Buffer

// Len returns the total number of bytes in the buffers of s.
func (s Slice) Len() int {
	n := 0
	for _, b := range s {
		n += b.Len()
	}
	return n
}

// Ref adds a reference to each buffer in s.
func (s Slice) Ref() {
	for _, b := range s {
		b.Ref()
	}
}

// Free releases one reference to each buffer in s. The Slice itself (its
// backing array) is left as it is; the caller must not use its buffers
// again.
func (s Slice) Free() {
	for _, b := range s {
		b.Free()
	}
}

// CopyTo copies the bytes of s into dst, as much as fits, and returns the
// number of bytes copied: min(len(dst), s.Len()), like the built-in copy.
func (s Slice) CopyTo(dst []byte) int {
	n := 0
	for _, b := range s {
		if n == len(dst) {
			break
		}
		n += copy(dst[n:], b.Bytes())
	}
	return n
}

// Materialize returns the bytes of s as one Buffer with a reference of its
// own; the caller still owns s and must free both. If s holds exactly one
// buffer, that buffer is returned with an added reference and nothing is
// copied (so it shares a reference count with s[0]: Split it only after
// freeing s). Otherwise the bytes are copied into a buffer taken from pool
// (allocated if pool is nil). An empty s gives the zero Buffer.
func (s Slice) Materialize(pool BufferPool) Buffer {
	switch len(s) {
	case 0:
		return Buffer{}
	case 1:
		s[0].Ref()
		return s[0]
	}
	n := s.Len()
	if n == 0 {
		return Buffer{}
	}
	b := newAllocSkip(pool, n)
	s.CopyTo(b.h.data)
	return b
}

// newAllocSkip is Alloc for callers inside the package, so that debug mode
// records the stack of their caller.
func newAllocSkip(pool BufferPool, n int) Buffer {
	return newRoot(getChunk(pool, n), pool, 3)
}

// AppendBuffers appends the bytes of each non-empty buffer in s to dst and
// returns the result, for vectored writes (net.Buffers.WriteTo uses writev
// where it can). The views are valid until s is freed; the caller must keep
// s, and not free it, until the write is done. Note that net.Buffers.WriteTo
// consumes the net.Buffers it is called on, not s.
func (s Slice) AppendBuffers(dst net.Buffers) net.Buffers {
	for _, b := range s {
		if p := b.Bytes(); len(p) > 0 {
			dst = append(dst, p)
		}
	}
	return dst
}

// Buffers returns s.AppendBuffers(nil).
func (s Slice) Buffers() net.Buffers {
	return s.AppendBuffers(make(net.Buffers, 0, len(s)))
}
