package cas

import (
	"context"
	"io"

	"github.com/membuf/membuf"
)

// ReadChunks reads [off, end) of r as a sequence of chunks and calls fn with
// each: the one way a BlobReader's ReadChunks reads a range, whatever holds
// the bytes (a file, a range of a segment, a frame). Each chunk is read with
// ReadAt (pread, at its own offset: an offset read seeks, it never reads and
// discards) into a buffer of its own from pool (fresh memory if pool is
// nil), sized to what remains, at most chunkSize bytes. It stops at the
// first error from r or fn; r ending before end is io.ErrUnexpectedEOF.
//
// Ownership: fn receives one reference to the chunk and owns it from then
// on, until it frees it or hands it to something that will: it must do one
// or the other exactly once, whether or not it returns an error.
// ReadChunks keeps nothing, so the chunk's memory goes back to the pool
// exactly when its last holder frees it. ByteStream Read hands each chunk
// to gRPC by reference (grpcmem.SendRead), which frees it after writing it
// to the wire, which may be after fn returns; nothing here may touch a
// chunk once fn has it.
//
// Per chunk this takes one buffer from the pool and a membuf header
// (recycled), and allocates nothing itself in the steady state
// (TestReadChunksAllocatesNothing). Sending the chunk does allocate:
// grpcmem.SendRead makes a 96-byte ReadResponse per chunk, which gRPC may
// hold after Send returns, so it cannot be recycled.
func ReadChunks(r io.ReaderAt, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	for off < end {
		n := int(min(int64(chunkSize), end-off))
		// Uncleared: ReadAt overwrites all n bytes, and a short read
		// frees the chunk unseen, so clearing it first would be wasted.
		chunk := membuf.AllocUncleared(pool, n)
		m, err := r.ReadAt(chunk.Bytes(), off)
		if m < n {
			chunk.Free()
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if err := fn(chunk); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// SendViews hands [lo, hi) of buf to fn as views of at most chunkSize bytes
// each, in order, with ReadChunks's ownership (fn owns each view), and frees
// buf's own reference: the memory goes back to its pool when fn's holders
// have freed every view. It is how a reader that reads more at once than
// it sends (a whole frame, a whole checked block) hands it on.
func SendViews(buf membuf.Buffer, lo, hi int64, chunkSize int, fn func(membuf.Buffer) error) error {
	defer buf.Free()
	for lo < hi {
		n := min(int64(chunkSize), hi-lo)
		if err := fn(buf.Slice(int(lo), int(lo+n))); err != nil {
			return err
		}
		lo += n
	}
	return nil
}

// WriteChunks is BlobReader.WriteRange for a reader whose bytes come into
// memory anyway: it writes each chunk r.ReadChunks hands on to w, then
// frees it, and returns the bytes written. It stops at the first error
// from the read or from w.
func WriteChunks(ctx context.Context, r BlobReader, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error) {
	var written int64
	err := r.ReadChunks(ctx, off, end, pool, chunkSize, func(c membuf.Buffer) error {
		defer c.Free()
		n, err := w.Write(c.Bytes())
		written += int64(n)
		return err
	})
	return written, err
}
