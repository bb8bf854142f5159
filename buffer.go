package membuf

import (
	"fmt"
	"sync/atomic"

	"github.com/membuf/membuf/internal/syncpool"
)

// A Buffer is a reference-counted view of bytes. The memory behind it goes
// back to the [BufferPool] it came from when the last reference to it, and to
// every view split or sliced from it, has been freed.
//
// A Buffer is a small value (16 bytes): a pointer to a recycled header plus
// the generation of the header it was issued for. Copying a Buffer copies the
// handle, not a reference: every copy stands for the same reference, and
// freeing one copy frees them all. Call [Buffer.Ref] for each additional
// owner and [Buffer.Free] once per reference.
//
// Misuse is always caught, even after the header has been reused for another
// buffer: freeing a reference twice, Ref after the last Free, and any access
// after the last Free panic with a message that names the misuse. In debug
// mode (see [DebugEnv] and [Pool]) the panic and a [Report] carry the stacks
// that took and freed the buffer, and buffers that are garbage-collected
// without being freed are reported with the stack that took them.
//
// The zero Buffer is an empty buffer: its Bytes is nil, its Len is 0, and Ref
// and Free do nothing.
//
// The bytes of a Buffer may be read from any number of goroutines. Ref and
// Free may be called concurrently. Split changes the view of the header it is
// called on and so needs the only reference to it (it panics otherwise).
type Buffer struct {
	h   *header
	gen uint32
}

// header is the shared state behind a Buffer handle. Headers are recycled
// (outside debug mode), which is why handles carry a generation.
//
// A root header owns the memory; a child header (made by Split or Slice)
// views part of its root's memory and holds one of the root's owner counts.
// The memory goes back to the pool when the root's owner count reaches zero:
// the root's own references count as one owner, each live child as another.
// This is the root-owner model of grpc-go PR 8784, with the owner count kept
// apart from the root's reference count so that a stale handle to the root
// can never be mistaken for a live child.
type header struct {
	refs refState
	// data is this header's view.
	data []byte
	// root is the header that owns the memory; a root points to itself.
	root *header

	// The following fields are used on root headers only.

	// owners counts the root's own references (as one) and its live children.
	owners atomic.Int32
	// orig is what the pool handed out; it goes back to pool.Put.
	orig *[]byte
	// pool is nil for memory that has nowhere to go back to.
	pool BufferPool

	// freedLen is the length of the view when its last reference was
	// released, kept to name the buffer in a double-free message.
	freedLen int
	// dbg is non-nil in debug mode; such headers are never recycled.
	dbg *bufferDebug
}

// headers recycles headers so that making, splitting, slicing and freeing
// buffers allocates nothing in the steady state.
var headers = syncpool.New(func() *header { return new(header) })

// NewBuffer returns a Buffer with one reference that views *data and takes
// ownership of data: when the buffer and every view made from it have been
// freed, data is passed to pool.Put. The caller must not use data or *data
// again except through the Buffer. If pool is nil, nothing is returned
// anywhere and the memory is left to the garbage collector.
//
// The buffer is in debug mode if the MEMBUF_DEBUG environment variable was
// true at start-up or pool is a [*Pool] in debug mode.
func NewBuffer(data *[]byte, pool BufferPool) Buffer {
	return newRoot(data, pool, 2)
}

// Alloc takes a slice of length n from pool and returns it as a Buffer with
// one reference (see [NewBuffer]). If pool is nil, the memory is allocated
// and left to the garbage collector.
func Alloc(pool BufferPool, n int) Buffer {
	if pool == nil {
		return Wrap(make([]byte, n))
	}
	return newRoot(pool.Get(n), pool, 2)
}

// AllocUncleared is Alloc for a caller that overwrites all n bytes before it
// reads them or hands the buffer on, such as a reader filling it from a file
// (and checking that it filled it): if pool has a GetUncleared method, as a
// [*Pool] has ([Pool.GetUncleared]), the memory is taken from it uncleared,
// so the caller does not pay for clearing what it fills at once; otherwise
// from Get. Every byte of the buffer may hold what a previous user wrote
// until the caller writes it.
func AllocUncleared(pool BufferPool, n int) Buffer {
	if pool == nil {
		return Wrap(make([]byte, n))
	}
	return newRoot(getUncleared(pool, n), pool, 2)
}

// getUncleared takes n bytes from pool through its GetUncleared method if it
// has one, or its Get.
func getUncleared(pool BufferPool, n int) *[]byte {
	if u, ok := pool.(interface{ GetUncleared(int) *[]byte }); ok {
		return u.GetUncleared(n)
	}
	return pool.Get(n)
}

// newRoot makes a root header for NewBuffer and Alloc. skip is the number of
// frames between newRoot and the caller whose stack debug mode records.
func newRoot(data *[]byte, pool BufferPool, skip int) Buffer {
	var h *header
	if buffersDebugBuilt && (debugFromEnv || wantsBufferDebug(pool)) {
		h = newDebugHeader(skip)
	} else {
		h = headers.Get()
	}
	return h.initRoot(*data, data, pool)
}

// initRoot makes h a root viewing data, whose memory goes back as
// pool.Put(orig) (nowhere if pool is nil), and issues its first handle.
func (h *header) initRoot(data []byte, orig *[]byte, pool BufferPool) Buffer {
	h.data = data
	h.root = h
	// A recycled root that was never split still holds 1 (releaseOwner's
	// fast path leaves it): skip the locked store then.
	if h.owners.Load() != 1 {
		h.owners.Store(1)
	}
	h.orig = orig
	h.pool = pool
	return Buffer{h: h, gen: h.refs.issue()}
}

// Wrap returns a Buffer with one reference viewing b, memory that did not
// come from a pool. Freeing it returns nothing anywhere, but misuse is caught
// exactly as for pooled buffers. Wrap does not copy b and does not allocate
// beyond a recycled header.
func Wrap(b []byte) Buffer {
	var h *header
	if buffersDebugBuilt && debugFromEnv {
		h = newDebugHeader(1)
	} else {
		h = headers.Get()
	}
	return h.initRoot(b, nil, nil)
}

// IsZero reports whether b is the zero Buffer.
func (b Buffer) IsZero() bool { return b.h == nil }

// Bytes returns the bytes b views. The slice is valid until this reference is
// freed; the caller must not keep it longer. Writing to it is allowed only
// while the caller holds the only reference to the memory (a buffer fresh
// from [Alloc], say); views made by Split and Slice share memory.
//
// Bytes panics if b has been freed.
func (b Buffer) Bytes() []byte {
	if b.h == nil {
		return nil
	}
	if !b.h.refs.live(b.gen) {
		b.useAfterFree("Bytes")
	}
	return b.h.data
}

// Len returns len(b.Bytes()).
func (b Buffer) Len() int {
	if b.h == nil {
		return 0
	}
	if !b.h.refs.live(b.gen) {
		b.useAfterFree("Len")
	}
	return len(b.h.data)
}

// Ref adds a reference to b. Each reference must be released by one call to
// Free. Ref panics if b has already been freed.
func (b Buffer) Ref() {
	if b.h == nil {
		return
	}
	if !b.h.refs.ref(b.gen) {
		b.refAfterFree()
	}
}

// Free releases one reference to b. When the last reference to b is released
// the view ends; when every view of the memory has ended, the memory goes
// back to its pool. Free panics if b has already been freed (a double free).
func (b Buffer) Free() {
	h := b.h
	if h == nil {
		return
	}
	last, ok := h.refs.release(b.gen)
	if !ok {
		b.doubleFree()
	}
	if last {
		h.end()
	}
}

// end runs once, when the last reference to h is released.
func (h *header) end() {
	h.freedLen = len(h.data)
	h.data = nil
	if buffersDebugBuilt && h.dbg != nil {
		h.dbg.freed(h.freedLen)
	}
	root := h.root
	if root != h {
		h.root = nil
		if h.dbg == nil {
			headers.Put(h)
		}
	}
	root.releaseOwner()
}

// releaseOwner drops one owner of the root header r, returning the memory
// to its pool and the header to the free list with the last.
func (r *header) releaseOwner() {
	// If the caller is the only owner, nobody can add one: a new child needs
	// a live reference, and the caller's last one has just gone. So the
	// common case (a buffer never split) skips the atomic add.
	if r.owners.Load() != 1 && r.owners.Add(-1) != 0 {
		return
	}
	if r.pool != nil {
		r.pool.Put(r.orig)
	}
	r.pool = nil
	r.orig = nil
	r.root = nil
	if r.dbg == nil {
		headers.Put(r)
	}
}

// child returns a new header viewing data, owned by b's root.
func (b Buffer) child(data []byte) Buffer {
	root := b.h.root
	var c *header
	if buffersDebugBuilt && root.dbg != nil {
		c = newDebugHeader(2)
	} else {
		c = headers.Get()
	}
	root.owners.Add(1)
	c.data = data
	c.root = root
	return Buffer{h: c, gen: c.refs.issue()}
}

// Split cuts b in two at n: afterwards b views its first n bytes and the
// returned buffer views the rest, with a reference of its own. The memory
// stays with its pool until both (and any other views) are freed. This is
// grpc-go's mem.SplitUnsafe.
//
// Split changes the view of b's header, which every copy of b and every
// reference added by b.Ref shares; so Split panics unless the caller holds
// the only reference to b. Use [Buffer.Slice] for views of shared buffers.
// Split panics if n is out of range or b has been freed. Splitting the zero
// Buffer at 0 returns the zero Buffer.
func (b Buffer) Split(n int) (right Buffer) {
	h := b.h
	if h == nil {
		if n != 0 {
			panic(fmt.Sprintf("membuf: Split(%d) of empty buffer", n))
		}
		return Buffer{}
	}
	refs, ok := h.refs.count(b.gen)
	if !ok {
		b.useAfterFree("Split")
	}
	if refs != 1 {
		panic(fmt.Sprintf("membuf: Split of a shared buffer (%d references); Split needs the only reference, use Slice", refs))
	}
	if n < 0 || n > len(h.data) {
		panic(fmt.Sprintf("membuf: Split(%d) out of range for buffer of length %d", n, len(h.data)))
	}
	right = b.child(h.data[n:])
	h.data = h.data[:n:n]
	return right
}

// Slice returns a new view of b.Bytes()[i:j] with a reference of its own; b
// is unchanged. The memory stays with its pool until every view is freed.
// Slice panics if i or j is out of range or b has been freed. Slicing the
// zero Buffer as [0:0] returns the zero Buffer.
func (b Buffer) Slice(i, j int) Buffer {
	h := b.h
	if h == nil {
		if i != 0 || j != 0 {
			panic(fmt.Sprintf("membuf: Slice(%d, %d) of empty buffer", i, j))
		}
		return Buffer{}
	}
	if !h.refs.live(b.gen) {
		b.useAfterFree("Slice")
	}
	if i < 0 || j < i || j > len(h.data) {
		panic(fmt.Sprintf("membuf: Slice(%d, %d) out of range for buffer of length %d", i, j, len(h.data)))
	}
	return b.child(h.data[i:j:j])
}

// String describes b (not its contents) for debugging. It does not panic on
// a freed buffer.
func (b Buffer) String() string {
	if b.h == nil {
		return "membuf.Buffer(empty)"
	}
	if n, ok := b.h.refs.count(b.gen); ok {
		return fmt.Sprintf("membuf.Buffer(%p gen %d, len %d, %d refs)", b.h, b.gen, len(b.h.data), n)
	}
	return fmt.Sprintf("membuf.Buffer(%p gen %d, freed)", b.h, b.gen)
}

// describe names a stale handle for a misuse message: its header and
// generation, and its length if the header has not been reused since.
func (b Buffer) describe() string {
	h := b.h
	if h.dbg != nil {
		return fmt.Sprintf("(header %p, generation %d, length %d)", h, b.gen, h.dbg.freedLength())
	}
	if h.refs.live(b.gen + 1) {
		// The header still shows the life that b ended.
		return fmt.Sprintf("(header %p, generation %d, length %d)", h, b.gen, h.freedLen)
	}
	return fmt.Sprintf("(header %p, generation %d; header since reused)", h, b.gen)
}
