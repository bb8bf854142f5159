package tier

import (
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier/uploadmem"
)

// Uploads from memory: a blob of batchEntryBytes or less that arrives
// plain through the tier (a write, a batch) is copied, as it is written,
// into a buffer from Config.Pool, which the uploader hands to the backend
// instead of reading the blob back from the disk (a read that checks what
// it reads: a third of a packed upload's CPU, profiled). The bytes were
// checked against the digest by the disk's commit, which they passed
// before the buffer is handed on. The journal lists the entry all the
// same: after a crash the next start reads it back from the disk, as it
// does every entry not held (Config.UploadMemory full, a blob larger than
// a batch's entries, an upload suspended while it waited).

// defaultUploadMemory is Config.UploadMemory's default: four of a packed
// backend's batches of 16 MiB.
const defaultUploadMemory = 64 << 20

// holdable reports whether a blob of digest d, arriving as arrived, is
// held for its upload when the budget has room.
func holdable(d cas.Digest, arrived cas.Encoding) bool {
	return d.Hash != "" && d.Size > 0 && d.Size <= batchEntryBytes && arrived == cas.Uncompressed
}

// holdBuffers returns a copy of data, the size bytes of a blob, held
// under t's budget, or nil (no room, or not size bytes).
func (t *Store) holdBuffers(data [][]byte, size int64) *uploadmem.Blob {
	var n int64
	for _, p := range data {
		n += int64(len(p))
	}
	if n != size {
		return nil
	}
	h := t.held.Hold(t.cfg.Pool, size)
	if h == nil {
		return nil
	}
	b := h.Bytes()[:0]
	for _, p := range data {
		b = append(b, p...) // within the capacity: n bytes in all
	}
	return h
}

// holdingWriter is the part of a tier writer that copies what it writes
// into a held blob.
type holdingWriter struct {
	cas.BlobWriter
	held *uploadmem.Blob // nil: nothing held (the upload reads back from disk)
}

func (w *holdingWriter) Write(p []byte) (int, error) {
	off := w.BlobWriter.Written()
	n, err := w.BlobWriter.Write(p)
	w.keep(off, p[:n])
	return n, err
}

func (w *holdingWriter) WriteBuffers(bufs [][]byte) (int64, error) {
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
func (w *holdingWriter) keep(off int64, p []byte) {
	if w.held == nil || len(p) == 0 {
		return
	}
	b := w.held.Bytes()
	if off < 0 || off+int64(len(p)) > int64(len(b)) {
		w.drop()
		return
	}
	copy(b[off:], p)
}

// Suspend lets the held blob go: an upload that waits idle holds no
// memory (its blob is read back from the disk once committed).
func (w *holdingWriter) Suspend() error {
	w.drop()
	return w.BlobWriter.Suspend()
}

func (w *holdingWriter) Abort() {
	w.drop()
	w.BlobWriter.Abort()
}

// take hands the held blob on, if it holds the whole blob.
func (w *holdingWriter) take() *uploadmem.Blob {
	h := w.held
	w.held = nil
	if h != nil && int64(len(h.Bytes())) != w.BlobWriter.Written() {
		h.Free()
		return nil
	}
	return h
}

func (w *holdingWriter) drop() {
	w.held.Free()
	w.held = nil
}
