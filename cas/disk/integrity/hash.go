package integrity

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/zstdseek"
	"github.com/membuf/membuf/internal/syncpool"
)

// ErrCorrupt marks a blob whose content does not match its name. Callers
// of the store see ErrNotFound: the blob is gone.
var ErrCorrupt = fmt.Errorf("%w: stored content does not match its digest (removed)", cas.ErrNotFound)

// HashChunk is what HashContent reads at a time (the pacing step of the
// scrubber) and the size of the Buffers' buffers.
const HashChunk = 1 << 20

// Buffers lends buffers of HashChunk bytes: for hashing, and for reading a
// packed record (at most HashChunk) whole.
var Buffers = syncpool.New(func() *[]byte {
	b := make([]byte, HashChunk)
	return &b
})

// Content is what HashContent needs to know of a stored blob.
type Content struct {
	Fn     cas.Function // the digest function the blob is named by
	Size   int64        // the blob's own
	Stored int64        // the file's
	Zstd   bool         // kept compressed: frames and a seek table (zstdseek)
	// Zstd's decoders, and the buffers a frame is read into.
	Pool    *zstdseek.Pool
	Buffers membuf.BufferPool
}

// HashContent returns the hash under c.Fn (hex) of the content of c, whose file f
// is, the block sums of the file as stored (frames and seek table for a
// compressed one), and how many bytes of content it hashed: the first
// c.Size bytes of a plain file, or what a compressed one decompresses to.
// A file shorter than that, a damaged frame or a bad seek table is
// ErrCorrupt. pace, if not nil, is called after each chunk hashed, with
// its length, and may wait (the scrubber's rate); its error stops it.
func HashContent(ctx context.Context, f vfs.File, c Content, pace func(int) error) (string, []uint32, int64, error) {
	bp := Buffers.Get()
	defer Buffers.Put(bp)
	buf := *bp
	if c.Zstd {
		return hashFrames(ctx, f, c, buf, pace)
	}
	h := c.Fn.New()
	size := c.Size
	sums := NewSums(size)
	var off int64
	for off < size {
		if err := ctx.Err(); err != nil {
			return "", nil, off, err
		}
		n := int(min(int64(len(buf)), size-off))
		m, err := f.ReadAt(buf[:n], off)
		h.Write(buf[:m])
		sums.Write(buf[:m])
		off += int64(m)
		if m < n {
			if err == io.EOF {
				// Shorter than its index entry: not the blob.
				return "", nil, off, ErrCorrupt
			}
			return "", nil, off, fmt.Errorf("disk: re-hashing %s: %w", filepath.Base(f.Name()), err)
		}
		if pace != nil {
			if err := pace(m); err != nil {
				return "", nil, off, err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), sums.Finish(), off, nil
}

// hashFrames is HashContent for a blob kept compressed: each frame is read
// into a buffer from c.Buffers and decompressed into buf (which holds
// maxStoredFrame bytes, the largest frame a seek table may give). It also
// takes the block sums of the file as stored, frames and seek table.
func hashFrames(ctx context.Context, f vfs.File, c Content, buf []byte, pace func(int) error) (string, []uint32, int64, error) {
	t, err := zstdseek.ReadSeekTable(f, c.Stored, c.Size)
	if errors.Is(err, zstdseek.ErrSeekTable) {
		return "", nil, 0, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err != nil {
		return "", nil, 0, fmt.Errorf("disk: re-hashing %s: %w", filepath.Base(f.Name()), err)
	}
	h := c.Fn.New()
	sums := NewSums(c.Stored)
	var cstart, off int64
	for i := range t.Frames() {
		if err := ctx.Err(); err != nil {
			return "", nil, off, err
		}
		cs, ds := t.Entry(i)
		in := membuf.AllocUncleared(c.Buffers, int(cs))
		_, err := f.ReadAt(in.Bytes(), cstart)
		var out []byte
		if err == nil {
			sums.Write(in.Bytes())
			out, err = c.Pool.DecodeFrame(ctx, in.Bytes(), buf[:0:ds])
			if err == nil && int64(len(out)) != ds {
				err = zstdfile.ErrCorruptFrame
			}
			if err != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w: frame %d: %v", ErrCorrupt, i, err)
			}
		}
		in.Free()
		if err != nil {
			return "", nil, off, err
		}
		h.Write(out)
		off += ds
		cstart += cs
		if pace != nil {
			if err := pace(int(ds)); err != nil {
				return "", nil, off, err
			}
		}
	}
	// The seek table after the frames, for the sums: the block that holds
	// the last frame's end holds the table's start.
	for cstart < c.Stored {
		n := int(min(int64(len(buf)), c.Stored-cstart))
		if _, err := f.ReadAt(buf[:n], cstart); err != nil {
			return "", nil, off, fmt.Errorf("disk: re-hashing %s: %w", filepath.Base(f.Name()), err)
		}
		sums.Write(buf[:n])
		cstart += int64(n)
	}
	return hex.EncodeToString(h.Sum(nil)), sums.Finish(), off, nil
}

// CheckData checks data, a blob's bytes in pieces, against d: its size,
// then its hash under d's function; a mismatch is an error wrapping
// cas.ErrMismatch.
func CheckData(d cas.Digest, data net.Buffers) error {
	if err := CheckName(d); err != nil {
		return err
	}
	var n int64
	for _, p := range data {
		n += int64(len(p))
	}
	if n != d.Size {
		return CheckSum(d, n, nil)
	}
	if d.Function == cas.SHA256 {
		var sum [sha256.Size]byte // what escapes: no more than SHA-256 needs
		return CheckSum(d, n, Sum(d.Function, sum[:0], data...))
	}
	var sum [sha512.Size]byte
	return CheckSum(d, n, Sum(d.Function, sum[:0], data...))
}

// CheckName checks that d names something the store can keep: one of
// cas.Functions, and a hash of that function's length in lowercase hex (a
// BLAKE3 digest with a SHA-1's 40 digits names nothing). The error wraps
// cas.ErrMismatch: no content matches such a digest.
func CheckName(d cas.Digest) error {
	if !d.Function.Valid() {
		return fmt.Errorf("%w: digest function %d is none the store knows", cas.ErrMismatch, uint8(d.Function))
	}
	if err := d.Function.CheckHash(d.Hash); err != nil {
		return fmt.Errorf("%w: %v", cas.ErrMismatch, err)
	}
	return nil
}

// Sum appends fn's hash of data, in pieces, to b. A SHA-256 of one piece
// allocates no hasher.
func Sum(fn cas.Function, b []byte, data ...[]byte) []byte {
	if fn == cas.SHA256 && len(data) == 1 {
		sum := sha256.Sum256(data[0])
		return append(b, sum[:]...)
	}
	h := fn.New()
	for _, p := range data {
		h.Write(p)
	}
	return h.Sum(b)
}

// SumHex is fn's hash of data in lowercase hex.
func SumHex(fn cas.Function, data []byte) string { return fn.Digest(data).Hash }

// CheckSum checks a blob received whole against d: n bytes whose hash
// under d's function is sum (not looked at unless n is the digest's size). A mismatch is an
// error wrapping cas.ErrMismatch. Every writer of the store ends with it,
// so the three say a mismatch the same way.
func CheckSum(d cas.Digest, n int64, sum []byte) error {
	if n == d.Size && len(d.Hash) != 2*len(sum) {
		if err := CheckName(d); err != nil {
			return err // not a hash of its function's length
		}
	}
	switch {
	case n > d.Size:
		return fmt.Errorf("%w: more than the %d bytes the digest says", cas.ErrMismatch, d.Size)
	case n < d.Size:
		return fmt.Errorf("%w: received %d bytes, the digest says %d", cas.ErrMismatch, n, d.Size)
	case !hexEqual(sum, d.Hash):
		return fmt.Errorf("%w: content hashes to %x, the digest says %s", cas.ErrMismatch, sum, d.Hash)
	}
	return nil
}

// hexEqual reports whether hash is sum in lowercase hex, without making
// the string (a commit's check is on every upload's path).
func hexEqual(sum []byte, hash string) bool {
	const digits = "0123456789abcdef"
	if len(hash) != 2*len(sum) {
		return false
	}
	for i, b := range sum {
		if hash[2*i] != digits[b>>4] || hash[2*i+1] != digits[b&15] {
			return false
		}
	}
	return true
}
