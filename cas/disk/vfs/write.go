package vfs

import (
	"bytes"
	"slices"
)

// A call through the File interface moves its arguments to the heap: the
// compiler cannot see that the method keeps none of them. The store's
// writes pass slices it made on its stack (a record's header, a request's
// list of buffers), so these functions make the operating system's writes
// straight through its system calls, with no allocation, and hand any
// other File a copy of the list.

// WriteAt is f.WriteAt(p, off), p kept off the heap when f is Default's.
func WriteAt(f File, p []byte, off int64) (int, error) {
	if of, ok := f.(*osFile); ok {
		return of.osf().WriteAt(p, off)
	}
	return f.WriteAt(bytes.Clone(p), off)
}

// WriteBuffers is f.WriteBuffers(bufs), bufs kept off the heap when f is
// Default's.
func WriteBuffers(f File, bufs [][]byte) (int, error) {
	if of, ok := f.(*osFile); ok {
		return writeBuffersAt(of.osf(), bufs, -1)
	}
	return f.WriteBuffers(slices.Clone(bufs))
}

// WriteBuffersAt is f.WriteBuffersAt(bufs, off), bufs kept off the heap
// when f is Default's.
func WriteBuffersAt(f File, bufs [][]byte, off int64) (int, error) {
	if of, ok := f.(*osFile); ok {
		return writeBuffersAt(of.osf(), bufs, off)
	}
	return f.WriteBuffersAt(slices.Clone(bufs), off)
}
