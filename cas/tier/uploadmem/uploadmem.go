// Package uploadmem holds blobs' bytes in memory for their uploads, under
// a budget: a tier hands a held blob to the backend instead of reading it
// back from its disk.
package uploadmem

import (
	"sync/atomic"

	"github.com/membuf/membuf"
)

// Budget bounds the bytes of the blobs held: a blob that does not fit is
// not held. It is safe for concurrent use.
type Budget struct {
	limit      int64
	held, peak atomic.Int64
}

// New returns a Budget of limit bytes; 0 or less holds nothing.
func New(limit int64) *Budget { return &Budget{limit: max(limit, 0)} }

// Hold returns a Blob of n bytes from pool, held under the budget, or nil
// if they do not fit in it. Its bytes are whatever the pool's memory held
// (uncleared): the caller writes every one before it reads them.
func (m *Budget) Hold(pool membuf.BufferPool, n int64) *Blob {
	for {
		h := m.held.Load()
		if h+n > m.limit {
			return nil
		}
		if m.held.CompareAndSwap(h, h+n) {
			for p := m.peak.Load(); h+n > p && !m.peak.CompareAndSwap(p, h+n); p = m.peak.Load() {
			}
			return &Blob{buf: membuf.AllocUncleared(pool, int(n)), budget: m, n: n}
		}
	}
}

// Held returns the bytes held now.
func (m *Budget) Held() int64 { return m.held.Load() }

// Peak returns the most bytes held at once.
func (m *Budget) Peak() int64 { return m.peak.Load() }

// Blob is a blob's bytes held in memory. One holder at a time owns it and
// frees it, which gives its memory back to the pool and its bytes back to
// the budget.
type Blob struct {
	buf    membuf.Buffer
	budget *Budget
	n      int64
}

// Bytes returns the blob's bytes, valid until Free.
func (b *Blob) Bytes() []byte { return b.buf.Bytes() }

// Free releases b; a nil b is nothing held, and freeing it does nothing.
// A second Free of the same Blob panics (membuf's double free).
func (b *Blob) Free() {
	if b == nil {
		return
	}
	b.buf.Free()
	b.budget.held.Add(-b.n)
}
