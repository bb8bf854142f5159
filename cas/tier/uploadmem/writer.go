package uploadmem

import (
	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// HoldCopy returns a copy of data, the size bytes of a blob, held under
// the budget in memory from pool, or nil (over the budget, or not size bytes).
func (m *Budget) HoldCopy(pool membuf.BufferPool, data [][]byte, size int64) *Blob {
	var n int64
	for _, p := range data {
		n += int64(len(p))
	}
	if n != size {
		return nil
	}
	h := m.Hold(pool, size)
	if h == nil {
		return nil
	}
	b := h.Bytes()[:0]
	for _, p := range data {
		b = append(b, p...) // within the capacity: n bytes in all
	}
	return h
}

// Writer is a blob writer that copies what it writes into Held, a blob
// held for its upload (nil: nothing held, the upload reads back from
// disk). Take hands the copy on.
type Writer struct {
	cas.BlobWriter
	Held *Blob
}

func (w *Writer) Write(p []byte) (int, error) {
	off := w.BlobWriter.Written()
	n, err := w.BlobWriter.Write(p)
	w.keep(off, p[:n])
	return n, err
}

func (w *Writer) WriteBuffers(bufs [][]byte) (int64, error) {
	off := w.BlobWriter.Written()
	n, err := w.BlobWriter.WriteBuffers(bufs)
	left := n // the bytes written are the first n of bufs
	for _, b := range bufs {
		if left == 0 {
			break
		}
		b = b[:min(int64(len(b)), left)]
		w.keep(off, b)
		off, left = off+int64(len(b)), left-int64(len(b))
	}
	return n, err
}

// keep copies p, written at off, into the held blob.
func (w *Writer) keep(off int64, p []byte) {
	if w.Held == nil || len(p) == 0 {
		return
	}
	b := w.Held.Bytes()
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		w.drop()
		return
	}
	copy(b[off:], p)
}

// Suspend lets the held blob go: an upload that waits idle holds no
// memory (its blob is read back from the disk once committed).
func (w *Writer) Suspend() error {
	w.drop()
	return w.BlobWriter.Suspend()
}

func (w *Writer) Abort() {
	w.drop()
	w.BlobWriter.Abort()
}

// Take hands the held blob on, if it holds the whole blob written, and
// nil otherwise; the Writer holds nothing after it.
func (w *Writer) Take() *Blob {
	h := w.Held
	w.Held = nil
	if h != nil && int64(len(h.Bytes())) != w.BlobWriter.Written() {
		h.Free()
		return nil
	}
	return h
}

func (w *Writer) drop() {
	w.Held.Free()
	w.Held = nil
}
