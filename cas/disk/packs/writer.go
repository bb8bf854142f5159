package packs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
)

// Writer writes one blob into a slot of the active segment, taken
// when it starts (the digest gives its size): its bytes go to the
// segment's file at their offset as they arrive, hashed and summed, and
// its committed header, then the group commit's fsync of the segment, make
// it a record. A slot abandoned by its writer stays a reserved record that
// scans step over, until its segment is evicted.
type Writer struct {
	set *Set
	d   cas.Digest
	seg *Segment
	off int64 // of the data in the segment
	h   hash.Hash
	crc uint32
	n   int64
	end bool
	// commit commits the record, its data written and checked against d:
	// writes its committed header, makes it durable and indexed (the
	// owner's group commit) and releases the slot.
	commit func(d cas.Digest, crc uint32) error
}

// NewWriter returns the writer of blob d into the slot whose data is at
// off in seg (TakeSlotLocked). Its Commit checks the content against d and
// hands the record to commit; Abort releases the slot.
func (s *Set) NewWriter(d cas.Digest, seg *Segment, off int64, commit func(d cas.Digest, crc uint32) error) *Writer {
	return &Writer{set: s, d: d, seg: seg, off: off, h: sha256.New(), commit: commit}
}

// Hash is the running SHA-256 of what was written (Sum leaves it as it
// is).
func (w *Writer) Hash() hash.Hash { return w.h }

// Rename names the blob hash before Commit: a writer started under a
// placeholder name (disk's unnamed writers), whose Commit then checks the
// content against the name given here.
func (w *Writer) Rename(hash string) { w.d.Hash = hash }

// Digest returns the digest the writer was started with.
func (w *Writer) Digest() cas.Digest { return w.d }

// Written returns the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// Write appends p; past the digest's size it fails with ErrMismatch and
// writes nothing.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.WriteBuffers([][]byte{p})
	return int(n), err
}

// WriteBuffers appends bufs with one pwritev.
func (w *Writer) WriteBuffers(bufs [][]byte) (int64, error) {
	if w.end {
		return 0, errors.New("disk: write after Commit or Abort")
	}
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	if total > w.d.Size-w.n {
		return 0, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	n, err := w.seg.WriteAt(bufs, w.off+w.n)
	for rest := n; rest > 0; bufs = bufs[1:] { // hash and sum what was written
		k := min(rest, len(bufs[0]))
		w.h.Write(bufs[0][:k])
		w.crc = packfile.UpdateChecksum(w.crc, bufs[0][:k])
		rest -= k
	}
	w.n += int64(n)
	return int64(n), err
}

// Suspend does nothing: the writer holds no descriptor of its own.
func (w *Writer) Suspend() error { return nil }

// Commit checks the content against the digest and commits the record
// (NewWriter's commit: the committed header, then the group commit).
func (w *Writer) Commit(context.Context) error {
	if w.end {
		return errors.New("disk: Commit after Commit or Abort")
	}
	var sum [sha256.Size]byte
	if err := integrity.CheckSum(w.d, w.n, w.h.Sum(sum[:0])); err != nil {
		w.Abort()
		return err
	}
	w.end = true
	return w.commit(w.d, w.crc)
}

// Abort gives the slot up.
func (w *Writer) Abort() {
	if w.end {
		return
	}
	w.end = true
	w.set.cfg.Mu.Lock()
	w.set.ReleaseSlotLocked(w.seg)
	w.set.cfg.Mu.Unlock()
}
