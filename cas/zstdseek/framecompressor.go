package zstdseek

import (
	"context"
	"io"

	"github.com/membuf/membuf"
)

// FrameCompressor turns a blob's bytes, written in order, into independent
// zstd frames of FrameSize uncompressed bytes each and, at the end, the
// seek table (seektable.go): the form a disk store keeps compressed blobs in.
//
// The first frame decides whether the blob is worth keeping compressed: if
// it does not shrink by at least an eighth (worthCompressing), the
// compressor gives up, writes what it holds as it is, and the blob is kept
// plain. Blobs shorter than a frame are decided at finish, seek table
// included.
//
// Its buffers come from a membuf.BufferPool: the frame being filled (taken
// at the first write, kept to the end) and the encoder's output (taken for
// each frame and given back once the frame is written). An encoder is
// borrowed from the Pool for each frame only. A FrameCompressor is not
// safe for concurrent use; call free when done with it.
type FrameCompressor struct {
	zp     *Pool
	pool   membuf.BufferPool
	in     membuf.Buffer // the frame being filled; zero until the first write
	n      int           // bytes of in filled
	table  seekTableBuilder
	stored int64 // compressed bytes written
	gaveUp bool  // the blob does not compress: the rest goes to the file plainly
}

// NewFrameCompressor returns a compressor that borrows its encoders from zp
// and its buffers from pool (nil: allocated).
func NewFrameCompressor(zp *Pool, pool membuf.BufferPool) FrameCompressor {
	return FrameCompressor{zp: zp, pool: pool}
}

// worthCompressing reports whether plain bytes that compress to compressed
// bytes are worth keeping compressed: a saving of at least an eighth. Less
// than that is not worth decompressing on every plain read.
func worthCompressing(plain, compressed int) bool {
	return compressed <= plain-plain/8
}

// Write adds p to the blob, compressing and writing each frame it fills to
// w. Once the compressor has given up (see gaveUp), write writes p to w as
// it is.
func (c *FrameCompressor) Write(w io.Writer, p []byte) error {
	if c.gaveUp {
		_, err := w.Write(p)
		return err
	}
	for len(p) > 0 {
		if c.in.IsZero() {
			c.in = membuf.AllocUncleared(c.pool, FrameSize) // only what is copied in is read
		}
		k := copy(c.in.Bytes()[c.n:], p)
		c.n += k
		p = p[k:]
		if c.n < FrameSize {
			break
		}
		if err := c.flush(w, 0); err != nil {
			return err
		}
		if c.gaveUp {
			_, err := w.Write(p)
			return err
		}
	}
	return nil
}

// flush compresses the frame held and writes it to w, or, if it is the
// first frame and does not compress enough (counting extra bytes of
// overhead), writes it plainly and gives up.
func (c *FrameCompressor) flush(w io.Writer, extra int) error {
	plain := c.in.Bytes()[:c.n]
	// Frame leases are short and never wait on a client, so a wait for one
	// needs no deadline of its own: it ends as the frames ahead of it do.
	out, err := c.zp.EncodeFrame(context.Background(), plain, c.pool)
	if err != nil {
		return err
	}
	defer out.Free()
	enc := out.Bytes()
	if c.table.frames() == 0 && !worthCompressing(c.n, len(enc)+extra) {
		c.gaveUp = true
		_, err := w.Write(plain)
		c.n = 0
		c.Free() // not needed again: the rest goes to w as it comes
		return err
	}
	if _, err := w.Write(enc); err != nil {
		return err
	}
	c.table.add(len(enc), c.n)
	c.stored += int64(len(enc))
	c.n = 0
	return nil
}

// Finish writes the last frame and the seek table to w. It reports whether
// the blob was kept compressed and, if so, the bytes written to w.
func (c *FrameCompressor) Finish(w io.Writer) (compressed bool, stored int64, err error) {
	if c.gaveUp {
		return false, 0, nil
	}
	if c.n > 0 {
		if err := c.flush(w, seekTableFixed+seekEntrySize); err != nil {
			return false, 0, err
		}
		if c.gaveUp {
			return false, 0, nil
		}
	}
	tail := c.table.appendTo(nil)
	if _, err := w.Write(tail); err != nil {
		return false, 0, err
	}
	return true, c.stored + int64(len(tail)), nil
}

// Free gives back the frame buffer.
func (c *FrameCompressor) Free() {
	c.in.Free()
	c.in = membuf.Buffer{}
}
