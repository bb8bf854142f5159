package mapped

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/membuf/membuf"
)

// ErrUnsupported is what Map returns on a platform without mmap: the
// caller reads the file with pread instead.
var ErrUnsupported = errors.New("mapped: mmap is not supported on this platform")

// Region is a read-only shared mapping of a range of a file. Its bytes
// are the file's as the page cache holds them: a write to the file shows
// through, which is why the store maps only files it no longer writes,
// or ranges of them it no longer writes.
type Region struct {
	data []byte
	// refs counts the mapper's reference and each live Buffer's root; the
	// mapping is removed when it reaches zero.
	refs atomic.Int64
}

// Map maps size bytes of f from off, size > 0 and off a multiple of the
// page size, read-only, and returns the region with one reference, the
// caller's, to be let go with Release. The mapping does not hold f open: f
// may be closed at once.
func Map(f *os.File, off, size int64) (*Region, error) {
	if size <= 0 || int64(int(size)) != size || off < 0 || off%int64(os.Getpagesize()) != 0 {
		return nil, fmt.Errorf("mapped: cannot map %d bytes at %d of %s", size, off, f.Name())
	}
	data, err := mmap(f, off, int(size))
	if err != nil {
		return nil, fmt.Errorf("mapped: mapping %s: %w", f.Name(), err)
	}
	r := &Region{data: data}
	r.refs.Store(1)
	return r, nil
}

// Bytes returns the mapping. It is valid while the caller holds a
// reference, and only for reading: a write faults.
func (r *Region) Bytes() []byte { return r.data }

// Len returns the mapping's length.
func (r *Region) Len() int { return len(r.data) }

// Buffer returns a Buffer with one reference viewing the whole mapping,
// which holds a reference to the region until the Buffer and every view
// sliced from it have been freed. Slice it to hand on a range: the
// views share the one root, so a read of a thousand chunks takes one
// region reference, not a thousand.
func (r *Region) Buffer() membuf.Buffer {
	r.refs.Add(1)
	return membuf.NewBuffer(&r.data, (*regionRelease)(r))
}

// Release lets one reference go; the last one removes the mapping.
func (r *Region) Release() {
	switch n := r.refs.Add(-1); {
	case n == 0:
		if err := munmap(r.data); err != nil {
			// Only an address that is not a mapping fails, which
			// would mean the count above is wrong: say so loudly.
			panic(fmt.Sprintf("mapped: munmap: %v", err))
		}
		r.data = nil
	case n < 0:
		panic("mapped: Region released more often than referenced")
	}
}

// regionRelease is the BufferPool a Region's Buffer goes back to: a Buffer
// calls only Put, with the data it was made with, when its last view is
// freed, and that is the reference Buffer took.
type regionRelease Region

// Get is never called by a Buffer; it is here because membuf.NewBuffer
// takes a BufferPool. It returns fresh memory.
func (p *regionRelease) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

// Put lets go of the reference the Buffer took.
func (p *regionRelease) Put(*[]byte) { (*Region)(p).Release() }
