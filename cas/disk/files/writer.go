package files

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

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
	fs       vfs.FS
	hooks    Hooks
	d        cas.Digest
	f        vfs.File // nil while suspended
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
	sums *integrity.Sums
}

// Hooks is what a Writer needs of the store it writes for.
type Hooks struct {
	// Reserve counts n more bytes of uploads in progress towards the
	// store's maximum size (evicting to make space), or fails (cas.ErrFull,
	// cas.ErrClosed); Unreserve gives n back.
	Reserve   func(n int64) error
	Unreserve func(n int64)
	// Commit makes f, its content complete and checked as c says,
	// the blob, durably (the group commit), counting it in place of the
	// reserved bytes; on error it removes f.
	Commit func(f vfs.File, c Written, reserved int64) error
}

// Written is a blob a Writer wrote, as it is on disk.
type Written struct {
	Digest cas.Digest
	Stored int64    // bytes in the file
	Zstd   bool     // kept compressed (zstdseek's format)
	Sums   []uint32 // the file's block sums, as written
}

// NewWriter returns the writer of blob d into f, a new temporary file of
// fsys (which a suspended writer opens again, and Abort removes). z,
// if not nil, compresses the blob into frames as it arrives (the store's
// policy), unless its first frame shows it does not compress.
func NewWriter(fsys vfs.FS, d cas.Digest, f vfs.File, z *zstdseek.FrameCompressor, hooks Hooks) *Writer {
	return &Writer{fs: fsys, hooks: hooks, d: d, f: f, name: f.Name(), h: sha256.New(), sums: integrity.NewSums(d.Size), z: z}
}

// Hash is the running SHA-256 of what was written (Sum leaves it as it
// is).
func (w *Writer) Hash() hash.Hash { return w.h }

// Rename names the blob hash before Commit: a writer started under a
// placeholder name (disk's unnamed writers), whose Commit then checks the
// content against the name given here.
func (w *Writer) Rename(hash string) { w.d.Hash = hash }

// reserveStep is how far ahead of what it has written a Writer reserves.
const reserveStep = 1 << 20

// Digest returns the digest the writer was started with.
func (w *Writer) Digest() cas.Digest { return w.d }

// Written returns the number of bytes written so far.
func (w *Writer) Written() int64 { return w.n }

// file returns the temporary file, opening it again (for appending) if the
// writer was suspended.
func (w *Writer) file() (vfs.File, error) {
	if w.f == nil {
		f, err := w.fs.OpenAppend(w.name)
		if err != nil {
			return nil, fmt.Errorf("disk: resuming an upload: %w", err)
		}
		w.f = f
	}
	return w.f, nil
}

// Write appends p. Writing past the digest's size fails with ErrMismatch
// and writes nothing; so does one the store has no space for (ErrFull).
func (w *Writer) Write(p []byte) (int, error) {
	f, err := w.prepare(int64(len(p)))
	if err != nil {
		return 0, err
	}
	if w.z != nil {
		if err := w.z.Write(integrity.SummingFile{F: f, Sums: w.sums}, p); err != nil {
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
	n, err := vfs.WriteBuffers(f, bufs)
	for rest := n; rest > 0; bufs = bufs[1:] { // hash what was written
		k := min(rest, len(bufs[0]))
		w.h.Write(bufs[0][:k])
		w.sums.Write(bufs[0][:k])
		rest -= k
	}
	w.n += int64(n)
	return int64(n), err
}

// prepare checks that n more bytes may be written, reserves space for them
// and returns the file to write them to.
func (w *Writer) prepare(n int64) (vfs.File, error) {
	if w.end {
		return nil, errors.New("disk: write after Commit or Abort")
	}
	if n > w.d.Size-w.n {
		return nil, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	if need := w.n + n; need > w.reserved {
		ahead := min(max(need, w.reserved+reserveStep), w.d.Size)
		if err := w.hooks.Reserve(ahead - w.reserved); err != nil {
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
	w.hooks.Unreserve(w.reserved - w.n)
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
	var sum [sha256.Size]byte
	if err := integrity.CheckSum(w.d, w.n, w.h.Sum(sum[:0])); err != nil {
		w.Abort()
		return err
	}
	f, err := w.file() // fsync needs a descriptor
	if err != nil {
		w.Abort()
		return err
	}
	c := Written{Digest: w.d, Stored: w.n}
	if w.z != nil {
		zstd, stored, err := w.z.Finish(integrity.SummingFile{F: f, Sums: w.sums})
		if err != nil {
			w.Abort()
			return err
		}
		if zstd {
			c.Zstd, c.Stored = true, stored
		}
		w.freeFrames()
	}
	c.Sums = w.sums.Finish() // of the file as written, frames or plain
	w.end = true
	return w.hooks.Commit(f, c, w.reserved)
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
	w.fs.Remove(w.name)
	w.hooks.Unreserve(w.reserved)
}
