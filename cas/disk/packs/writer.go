package packs

import (
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// Writer writes one blob into a slot of the active segment, taken
// when it starts (the digest gives its size): its bytes go to the
// segment's file at their offset as they arrive, hashed and summed, and
// its committed header, then the owner's group commit (to which Finish
// returns the record), make it a record. Its first write carries the slot's header too (see Slot):
// the committed one when that write is the whole blob and matches the
// digest, so that a blob that arrives in one piece costs one pwritev;
// else the reserved one, and Finish writes the committed header. A slot
// abandoned by its writer stays a reserved record that scans step over,
// until its segment is evicted.
type Writer struct {
	set *Set
	d   cas.Digest
	sl  Slot
	h   hash.Hash
	crc uint32
	n   int64
	end bool
	// header is the state of the header this writer wrote into the slot
	// (packfile.Reserved or Committed); 0 if it wrote none.
	header uint8
	// broken: a first write hashed the whole blob and then failed, so the
	// hash no longer matches what was written.
	broken error
	// Space for the sum, the first write's header and its vector, which
	// escape (through hash.Hash and the system call): three allocations
	// a blob as locals.
	digest [sha512.Size]byte // the longest sum of any function
	hdr    [packfile.LongHeaderLen]byte
	iov    [4][]byte
}

// NewWriter returns the writer of blob d. The caller takes its slot
// (TakeSlot into Slot) before the first write. Its Finish checks the
// content against d and returns the record for the caller to commit (and
// then release the slot); Abort releases the slot.
func (s *Set) NewWriter(d cas.Digest) *Writer {
	w := new(Writer)
	s.InitWriter(w, d)
	return w
}

// InitWriter makes w the writer NewWriter returns, for a caller that
// keeps the Writer inside a value of its own (one allocation an upload,
// not two). w must be a zero Writer.
func (s *Set) InitWriter(w *Writer, d cas.Digest) {
	w.set, w.d, w.h = s, d, d.Function.New()
}

// Slot is the writer's slot, for the caller to take.
func (w *Writer) Slot() *Slot { return &w.sl }

// Hash is the running hash (of d's function) of what was written (Sum leaves it as it
// is).
func (w *Writer) Hash() hash.Hash { return w.h }

// Rename names the blob hash before Finish: a writer started under a
// placeholder name (disk's unnamed writers), whose Finish then checks the
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

// WriteBuffers appends bufs with one pwritev (the first with the slot's
// header, if no sync wrote it first).
func (w *Writer) WriteBuffers(bufs [][]byte) (int64, error) {
	if w.end {
		return 0, errors.New("disk: write after Commit or Abort")
	}
	if w.broken != nil {
		return 0, w.broken
	}
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	if total > w.d.Size-w.n {
		return 0, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	if w.n == 0 && w.sl.Claim() {
		return w.writeFirst(bufs, total)
	}
	n, err := w.sl.Seg.WriteAt(bufs, w.sl.Off+w.n)
	w.sum(bufs, n)
	w.n += int64(n)
	return int64(n), err
}

// sum hashes and sums the first n bytes of bufs: what was written.
func (w *Writer) sum(bufs [][]byte, n int) {
	for rest := n; rest > 0; bufs = bufs[1:] {
		k := min(rest, len(bufs[0]))
		w.h.Write(bufs[0][:k])
		w.crc = packfile.UpdateChecksum(w.crc, bufs[0][:k])
		rest -= k
	}
}

// writeFirst is the first write, the slot's header claimed: the header
// and bufs in one pwritev. When bufs are the whole blob they are hashed
// first, and a blob that matches its digest gets its committed header at
// once.
func (w *Writer) writeFirst(bufs [][]byte, total int64) (int64, error) {
	state, crc, whole := uint8(packfile.Reserved), uint32(0), total == w.d.Size
	if whole {
		w.sum(bufs, int(total))
		if integrity.CheckSum(w.d, total, w.h.Sum(w.digest[:0])) == nil {
			state, crc = packfile.Committed, w.crc
		}
	}
	hdr := w.hdr[:w.sl.headerLen()]
	w.sl.header(hdr, w.d.Hash, state, crc)
	iov := append(append(w.iov[:0], hdr), bufs...)
	n, err := vfs.WriteBuffersAt(w.sl.Seg.f, iov, w.sl.Off-int64(len(hdr)))
	clear(w.iov[:]) // not to keep the caller's buffers reachable
	written := max(n-len(hdr), 0)
	var headerErr error
	if n < len(hdr) {
		headerErr = err
	} else {
		w.header = state
	}
	w.set.Headed(&w.sl, headerErr)
	switch {
	case !whole:
		w.sum(bufs, written)
	case err != nil:
		w.broken = fmt.Errorf("disk: an earlier write failed: %w", err)
	}
	w.n += int64(written)
	return int64(written), err
}

// Suspend does nothing: the writer holds no descriptor of its own.
func (w *Writer) Suspend() error { return nil }

// Finish checks the content against the digest, writes the committed
// header unless the first write did, and returns the record's digest and
// data CRC-32C, in the writer's Slot: the caller commits it (its group
// commit) and releases the slot. On error the slot is given up (Abort).
func (w *Writer) Finish() (cas.Digest, uint32, error) {
	if w.end {
		return cas.Digest{}, 0, errors.New("disk: Commit after Commit or Abort")
	}
	if w.broken != nil {
		w.Abort()
		return cas.Digest{}, 0, w.broken
	}
	if err := integrity.CheckSum(w.d, w.n, w.h.Sum(w.digest[:0])); err != nil {
		w.Abort()
		return cas.Digest{}, 0, err
	}
	if w.header != packfile.Committed {
		// A sync may be writing the reserved header still (its Claim came
		// before this writer's): the committed one goes over it after.
		w.set.AwaitHeaded(&w.sl)
		if err := w.sl.Seg.WriteHeader(w.sl.kind, w.sl.fn, w.d.Hash, packfile.Committed, w.sl.size, w.crc, w.sl.Off); err != nil {
			w.Abort()
			return cas.Digest{}, 0, fmt.Errorf("disk: committing a record: %w", err)
		}
		w.header = packfile.Committed
	}
	w.end = true
	return w.d, w.crc, nil
}

// Abort gives the slot up. A committed header written already (the whole
// blob came in one write) is rewritten as a reserved one's, so that a
// start does not take for stored a blob that was given up.
func (w *Writer) Abort() {
	if w.end {
		return
	}
	w.end = true
	if w.header == packfile.Committed {
		if err := w.sl.Seg.WriteHeader(w.sl.kind, w.sl.fn, w.d.Hash, packfile.Reserved, w.sl.size, 0, w.sl.Off); err != nil {
			w.set.cfg.Log.Warn("giving up a packed record (a start may take it for stored; its content is its name's)", "err", err)
		}
	}
	w.set.ReleaseSlot(w.sl.Seg)
}
