package disk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/fileio"
	"github.com/membuf/membuf/cas/zstdseek"
)

func (s *Store) createTemp() (*os.File, error) {
	if s.isClosed() {
		return nil, cas.ErrClosed
	}
	return os.CreateTemp(s.tmpDir, "upload-*")
}

// discardTemp closes and removes a temporary file.
func discardTemp(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}

// commitTemp makes the temporary file f, whose content is complete and
// checked, the entry k, durably: through the group commit (groupcommit.go),
// which fsyncs f, renames it into place, indexes the entry, evicts down to
// the maximum size and fsyncs the directory, for every file committed at
// about the same time at once. reserved is what a Writer reserved for f's
// bytes: it becomes the entry's size in the same locked step, or is
// released on error. On error f is removed.
func (s *Store) commitTemp(f *os.File, e *entry, reserved int64) error {
	c := s.pendingCommit(f, e, reserved)
	s.committer.commit(c)
	return c.err
}

// pendingCommit prepares f for the group commit as entry e (its key, sizes
// and form), which the commit takes over.
func (s *Store) pendingCommit(f *os.File, e *entry, reserved int64) *pendingCommit {
	// The content was checked on its way in: as of this modification time
	// it is verified (verify.go). Without it, the first read re-hashes.
	if fi, err := f.Stat(); err == nil {
		e.checked = fi.ModTime().UnixNano()
	}
	return &pendingCommit{f: f, e: e, reserved: reserved}
}

// Writer writes one blob: content goes to a temporary file and is hashed as
// it streams; Commit checks size and hash and only then makes the blob
// visible. A Writer is not safe for concurrent use.
//
// The bytes it writes count towards the store's maximum size from the
// moment they are written (reserved ahead, in steps of reserveStep, so
// that a stream of small writes does not take the store's lock for each):
// uploads in progress evict stored entries like committed ones do, and can
// never take the disk past the maximum size.
type Writer struct {
	s        *Store
	d        cas.Digest
	f        *os.File // nil while suspended
	name     string   // the temporary file's path
	h        hash.Hash
	n        int64
	reserved int64 // bytes of s.partial this writer holds, >= n
	end      bool
	// z compresses the blob into frames, if the store keeps blobs that
	// arrived as this one did compressed; nil otherwise. Its frame being
	// filled stays in memory while the writer is suspended.
	z *zstdseek.FrameCompressor
	// sums takes the block sums of the content as it arrives: what is on
	// disk, unless z ends up keeping it compressed (readcheck.go).
	sums *blockSums
}

// reserveStep is how far ahead of what it has written a Writer reserves.
const reserveStep = 1 << 20

// NewWriter starts writing blob d, a *Writer. If the store's policy keeps
// blobs that arrived as arrived compressed, the writer compresses as it
// writes, unless the first frame shows the blob does not compress. The
// caller must call Commit or Abort.
func (s *Store) NewWriter(_ context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if s.maxSize > 0 && d.Size > s.maxSize {
		return nil, fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
	}
	if s.packable(d.Size) {
		return s.newPackWriter(d)
	}
	f, err := s.createTemp()
	if err != nil {
		return nil, err
	}
	w := &Writer{s: s, d: d, f: f, name: f.Name(), h: sha256.New(), sums: newBlockSums(d.Size)}
	if s.policy.compresses(arrived) {
		c := zstdseek.NewFrameCompressor(s.zp, s.buffers)
		w.z = &c
	}
	return w, nil
}

// reserve counts n more bytes of uploads in progress towards the maximum
// size, evicting stored entries to make room. If the uploads in progress
// alone would take more than the maximum size it fails with ErrFull.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cas.ErrClosed
	}
	if s.maxSize > 0 && s.partial+n > s.maxSize {
		return fmt.Errorf("%w (%d of %d bytes)", cas.ErrFull, s.partial, s.maxSize)
	}
	s.partial += n
	s.evictLocked(nil)
	return nil
}

// unreserve gives back n bytes reserved.
func (s *Store) unreserve(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.partial -= n
	s.mu.Unlock()
}

// Digest returns the digest the writer was started with.
func (w *Writer) Digest() cas.Digest { return w.d }

// Written returns the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// file returns the temporary file, opening it again (for appending) if the
// writer was suspended.
func (w *Writer) file() (*os.File, error) {
	if w.f == nil {
		f, err := os.OpenFile(w.name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, fmt.Errorf("disk: resuming an upload: %w", err)
		}
		w.f = f
	}
	return w.f, nil
}

// Write appends p. Writing past the digest's size fails with ErrMismatch
// and writes nothing; so does one the store has no room for (ErrFull).
func (w *Writer) Write(p []byte) (int, error) {
	f, err := w.prepare(int64(len(p)))
	if err != nil {
		return 0, err
	}
	if w.z != nil {
		if err := w.z.Write(summingFile{f, w.sums}, p); err != nil {
			return 0, err
		}
		w.h.Write(p)
		w.n += int64(len(p))
		return len(p), nil
	}
	n, err := f.Write(p)
	w.h.Write(p[:n])
	w.sums.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// WriteBuffers appends each of bufs in turn, as Write would, with one
// vectored write (writev) for them all: a ByteStream request arrives as one
// buffer per 16 KiB HTTP/2 frame, and one system call per frame cost more
// CPU than the copy into the page cache (docs/zerocopy.md). It returns the
// bytes written; on error the writer holds those and no more.
func (w *Writer) WriteBuffers(bufs [][]byte) (int64, error) {
	if w.z != nil {
		// Compressed as it goes: the frames go through the compressor.
		return cas.WriteEach(w, bufs)
	}
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	f, err := w.prepare(total)
	if err != nil {
		return 0, err
	}
	n, err := fileio.WriteBuffers(f, bufs)
	for rest := n; rest > 0; bufs = bufs[1:] { // hash what was written
		k := min(rest, len(bufs[0]))
		w.h.Write(bufs[0][:k])
		w.sums.Write(bufs[0][:k])
		rest -= k
	}
	w.n += int64(n)
	return int64(n), err
}

// prepare checks that n more bytes may be written, reserves room for them
// and returns the file to write them to.
func (w *Writer) prepare(n int64) (*os.File, error) {
	if w.end {
		return nil, errors.New("disk: write after Commit or Abort")
	}
	if n > w.d.Size-w.n {
		return nil, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	if need := w.n + n; need > w.reserved {
		ahead := min(max(need, w.reserved+reserveStep), w.d.Size)
		if err := w.s.reserve(ahead - w.reserved); err != nil {
			return nil, err
		}
		w.reserved = ahead
	}
	return w.file()
}

// Suspend closes the temporary file until the next Write or Commit, and
// gives back what was reserved ahead of what was written: an upload kept
// idle for resumption holds no descriptor and only its own bytes.
func (w *Writer) Suspend() error {
	if w.end {
		return nil
	}
	w.s.unreserve(w.reserved - w.n)
	w.reserved = w.n
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Commit checks that the content matches the digest, then fsyncs it and
// makes it visible. On a mismatch or any other error nothing is stored and
// the temporary file is removed.
func (w *Writer) Commit(context.Context) error {
	if w.end {
		return errors.New("disk: Commit after Commit or Abort")
	}
	if w.n != w.d.Size {
		w.Abort()
		return fmt.Errorf("%w: received %d bytes, the digest says %d", cas.ErrMismatch, w.n, w.d.Size)
	}
	if got := hex.EncodeToString(w.h.Sum(nil)); got != w.d.Hash {
		w.Abort()
		return fmt.Errorf("%w: content hashes to %s, the digest says %s", cas.ErrMismatch, got, w.d.Hash)
	}
	f, err := w.file() // fsync needs a descriptor
	if err != nil {
		w.Abort()
		return err
	}
	e := &entry{key: entryKey{kindCAS, w.d.Hash}, size: w.n, stored: w.n}
	if w.z != nil {
		zstd, stored, err := w.z.Finish(summingFile{f, w.sums})
		if err != nil {
			w.Abort()
			return err
		}
		if zstd {
			e.zstd, e.stored = true, stored
		}
		w.freeFrames()
	}
	e.sums = w.sums.finish() // of the file as written, frames or plain
	w.end = true
	return w.s.commitTemp(f, e, w.reserved)
}

// freeFrames gives back the compressor's buffers.
func (w *Writer) freeFrames() {
	if w.z != nil {
		w.z.Free()
		w.z = nil
	}
}

// Abort discards the upload. It is safe to call after Commit (it does
// nothing then).
func (w *Writer) Abort() {
	if w.end {
		return
	}
	w.end = true
	w.freeFrames()
	if w.f != nil {
		w.f.Close()
	}
	os.Remove(w.name)
	w.s.unreserve(w.reserved)
}
