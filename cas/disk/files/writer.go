package files

import (
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Writer writes one blob: content goes to a temporary file and is hashed as
// it streams; Finish checks size and hash and returns the file, complete,
// for the store to commit. It calls nothing of the store's: what its bytes
// count towards the store's maximum size is the store's to reserve before
// it writes them. A Writer is not safe for concurrent use.
type Writer struct {
	fs   vfs.FS
	d    cas.Digest
	f    vfs.File // nil while suspended
	name string   // the temporary file's path
	h    hash.Hash
	n    int64
	end  bool
	// z compresses the blob into frames, if the store keeps blobs that
	// arrived as this one did compressed; nil otherwise. Its frame being
	// filled stays in memory while the writer is suspended.
	z *zstdseek.FrameCompressor
	// sums takes the block sums of the content as it arrives: what is on
	// disk, unless z ends up keeping it compressed (readcheck.go).
	sums *integrity.Sums
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
func NewWriter(fsys vfs.FS, d cas.Digest, f vfs.File, z *zstdseek.FrameCompressor) *Writer {
	w := new(Writer)
	InitWriter(w, fsys, d, f, z)
	return w
}

// InitWriter makes w the writer NewWriter returns, for a caller that
// keeps the Writer inside a value of its own (one allocation an upload,
// not two).
func InitWriter(w *Writer, fsys vfs.FS, d cas.Digest, f vfs.File, z *zstdseek.FrameCompressor) {
	*w = Writer{fs: fsys, d: d, f: f, name: f.Name(), h: d.Function.New(), sums: integrity.NewSums(d.Size), z: z}
}

// Hash is the running hash, under the digest's function, of what was
// written (Sum leaves it as it is).
func (w *Writer) Hash() hash.Hash { return w.h }

// Rename names the blob hash before Finish: a writer started under a
// placeholder name (disk's unnamed writers), whose Finish then checks the
// content against the name given here.
func (w *Writer) Rename(hash string) { w.d.Hash = hash }

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
		var total int64
		for _, b := range bufs {
			n, err := w.Write(b)
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		return total, nil
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

// prepare checks that n more bytes may be written and returns the file to
// write them to.
func (w *Writer) prepare(n int64) (vfs.File, error) {
	if w.end {
		return nil, errors.New("disk: write after Commit or Abort")
	}
	if n > w.d.Size-w.n {
		return nil, fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, w.d.Size)
	}
	return w.file()
}

// Suspend closes the temporary file until the next Write or Finish: an
// upload kept idle for resumption holds no descriptor.
func (w *Writer) Suspend() error {
	if w.end {
		return nil
	}
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}

// Finish checks that the content matches the digest and returns the
// temporary file, open (its fsync needs a descriptor), and the blob as
// written, for the store to commit: the file is the caller's from then on.
// On a mismatch or any other error the temporary file is removed.
func (w *Writer) Finish() (vfs.File, Written, error) {
	if w.end {
		return nil, Written{}, errors.New("disk: Commit after Commit or Abort")
	}
	var sum [sha512.Size]byte // the longest of any function
	if err := integrity.CheckSum(w.d, w.n, w.h.Sum(sum[:0])); err != nil {
		w.Abort()
		return nil, Written{}, err
	}
	f, err := w.file()
	if err != nil {
		w.Abort()
		return nil, Written{}, err
	}
	c := Written{Digest: w.d, Stored: w.n}
	if w.z != nil {
		zstd, stored, err := w.z.Finish(integrity.SummingFile{F: f, Sums: w.sums})
		if err != nil {
			w.Abort()
			return nil, Written{}, err
		}
		if zstd {
			c.Zstd, c.Stored = true, stored
		}
		w.freeFrames()
	}
	c.Sums = w.sums.Finish() // of the file as written, frames or plain
	w.end = true
	return f, c, nil
}

// freeFrames gives back the compressor's buffers.
func (w *Writer) freeFrames() {
	if w.z != nil {
		w.z.Free()
		w.z = nil
	}
}

// Abort discards the upload. It is safe to call after Finish (it does
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
}
