package membuf

import (
	"runtime"
	"sync"
)

// Debug mode for buffers. A header made in debug mode is never recycled, so
// that a stale handle keeps pointing at the record of the buffer it was
// issued for; it records the stack that took it and, at its last Free, the
// stack that freed it; and a runtime cleanup reports it if it becomes
// garbage without having been freed.
//
// Outside debug mode none of this runs: the only cost is the test of
// debugFromEnv and the pool's switch when a buffer is made, and a nil test
// of header.dbg when a view ends.

// bufferDebug is what debug mode knows about one header. It must not point
// back at the header: the leak cleanup holds it, and a cleanup whose
// argument reaches the object it watches never runs.
type bufferDebug struct {
	mu      sync.Mutex
	taken   *stack
	freedAt *stack
	length  int
	cleanup runtime.Cleanup
}

// wantsBufferDebug reports whether pool asks for debug mode.
func wantsBufferDebug(pool BufferPool) bool {
	p, ok := pool.(*Pool)
	return ok && p.debugOn()
}

// newDebugHeader returns a fresh header with debug records, taken by the
// caller skip frames above newDebugHeader's caller.
func newDebugHeader(skip int) *header {
	h := new(header)
	d := &bufferDebug{taken: recordStack(skip + 1)}
	d.cleanup = runtime.AddCleanup(h, reportLeak, d)
	h.dbg = d
	return h
}

// reportLeak runs on the runtime's cleanup goroutine when a debug header
// became garbage before its last reference was freed.
func reportLeak(d *bufferDebug) {
	report(Report{
		Kind:    ReportLeak,
		Message: "buffer garbage-collected without being freed",
		Taken:   d.taken.String(),
	})
}

// freed records the last Free of the header (called from header.end).
func (d *bufferDebug) freed(length int) {
	d.cleanup.Stop()
	st := recordStack(3) // above end and Free
	d.mu.Lock()
	d.freedAt = st
	d.length = length
	d.mu.Unlock()
}

func (d *bufferDebug) freedLength() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.length
}

func (d *bufferDebug) stacks() (taken, freed string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.taken.String(), d.freedAt.String()
}

// The misuse panics are out of line so that the hot paths carry only the
// check (refState's helpers, which inline) and a call, not the formatting.

//go:noinline
func (b Buffer) doubleFree() {
	msg := "membuf: double free of buffer " + b.describe()
	if d := b.h.dbg; d != nil {
		taken, freed := d.stacks()
		report(Report{Kind: ReportDoubleFree, Message: msg[len("membuf: "):], Taken: taken, Freed: freed})
		msg += "\ntaken at:\n" + taken + "first freed at:\n" + freed
	}
	panic(msg)
}

//go:noinline
func (b Buffer) refAfterFree() {
	panic(b.misuseMessage("membuf: Ref of freed buffer "))
}

//go:noinline
func (b Buffer) useAfterFree(op string) {
	panic(b.misuseMessage("membuf: use of freed buffer in " + op + " "))
}

func (b Buffer) misuseMessage(prefix string) string {
	msg := prefix + b.describe()
	if d := b.h.dbg; d != nil {
		taken, freed := d.stacks()
		msg += "\ntaken at:\n" + taken + "freed at:\n" + freed
	}
	return msg
}
