// Package zstdfile reads a blob kept as a seekable zstd file (independent
// frames and a seek table: package zstdseek) as a cas.BlobReader, plain or
// compressed, and compresses a blob kept plain as it is read
// (CompressChunks). The disk store keeps compressed blobs in such files. It
// knows nothing of the store's index or layout: it is given an open file
// and the blob's size.
package zstdfile

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// emptyZstdFrame is a zstd frame of no content: what a compressed read with
// nothing left to send sends, so that the client decodes a valid stream.
// Never written to: it goes to gRPC by reference from every such read.
var emptyZstdFrame = []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00}

// ErrCorruptFrame: a stored frame did not decode to the size its seek table
// gives; the file is damaged. A read that finds one fails with it: the
// verdict, which the reader's owner acts on (the disk store removes the blob).
var ErrCorruptFrame = errors.New("stored zstd frame is damaged")

// Blob is an open blob kept compressed: independent frames and a seek
// table (package zstdseek). A plain read decompresses the frames it needs, one
// at a time, starting with the one holding its offset; a compressed read
// sends the stored frames as they are.
type Blob struct {
	f     vfs.File
	size  int64
	table zstdseek.SeekTable
	zp    *zstdseek.Pool
	// stored reads a range of the file as it is stored, for a compressed
	// read; nil reads it with cas.ReadChunks (SetStoredReader).
	stored StoredReader
}

// A StoredReader reads [off, end) of a compressed blob's file as it is
// stored, with cas.ReadChunks's contract: how a compressed read gets the
// frames it sends on as they are (the disk store's checks each block
// against a CRC first).
type StoredReader func(off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error

// SetStoredReader makes compressed reads of b read the file through r.
// Plain reads need none: zstd checks each frame's checksum as it
// decompresses it.
func (b *Blob) SetStoredReader(r StoredReader) { b.stored = r }

// Open checks the seek table of the compressed file f of a blob of size
// bytes and returns the blob, which owns f from then on. On error f is
// closed.
func Open(f vfs.File, size int64, zp *zstdseek.Pool) (*Blob, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	t, err := zstdseek.ReadSeekTable(f, fi.Size(), size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Blob{f: f, size: size, table: t, zp: zp}, nil
}

// Table returns the blob's seek table.
func (b *Blob) Table() zstdseek.SeekTable { return b.table }

// Size returns the blob's uncompressed size.
func (b *Blob) Size() int64 { return b.size }

// Stored returns Zstd.
func (b *Blob) Stored() cas.Encoding { return cas.Zstd }

// Close releases the file.
func (b *Blob) Close() error { return b.f.Close() }

// frame reads frame i, which starts at compressed offset cstart, and
// decompresses it into a buffer of its own from pool.
func (b *Blob) frame(ctx context.Context, pool membuf.BufferPool, i int, cstart int64) (membuf.Buffer, error) {
	cs, ds := b.table.Entry(i)
	in := membuf.AllocUncleared(pool, int(cs))
	defer in.Free()
	if _, err := b.f.ReadAt(in.Bytes(), cstart); err != nil {
		return membuf.Buffer{}, fmt.Errorf("zstdfile: reading zstd frame %d: %w", i, err)
	}
	out := membuf.AllocUncleared(pool, int(ds))
	got, err := b.zp.DecodeFrame(ctx, in.Bytes(), out.Bytes()[:0:ds])
	if err != nil || int64(len(got)) != ds {
		out.Free()
		if ctx.Err() != nil {
			return membuf.Buffer{}, ctx.Err()
		}
		return membuf.Buffer{}, fmt.Errorf("zstdfile: frame %d of %d bytes decoded to %d (%v): %w", i, ds, len(got), err, ErrCorruptFrame)
	}
	return out, nil
}

// ReadChunks decompresses [off, end), frame by frame. Each frame is
// decompressed into one buffer from pool and handed to fn as views of at
// most chunkSize bytes, without copying; see BlobReader.
func (b *Blob) ReadChunks(ctx context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	i, dstart, cstart := b.table.FrameAt(off)
	for dstart < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		cs, ds := b.table.Entry(i)
		plain, err := b.frame(ctx, pool, i, cstart)
		if err != nil {
			return err
		}
		if err := cas.SendViews(plain, max(off, dstart)-dstart, min(end, dstart+ds)-dstart, chunkSize, fn); err != nil {
			return err
		}
		i, dstart, cstart = i+1, dstart+ds, cstart+cs
	}
	return nil
}

// ReadZstd sends the stored frames from the one holding off to the last,
// read from disk as they are. If off is inside a frame, that frame's part
// from off is recompressed first. See BlobReader.
func (b *Blob) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if off >= b.size {
		return fn(membuf.Wrap(emptyZstdFrame))
	}
	i, dstart, cstart := b.table.FrameAt(off)
	if off > dstart {
		cs, _ := b.table.Entry(i)
		plain, err := b.frame(ctx, pool, i, cstart)
		if err != nil {
			return err
		}
		err = compressFrame(ctx, b.zp, plain.Bytes()[off-dstart:], pool, chunkSize, fn)
		plain.Free()
		if err != nil {
			return err
		}
		cstart += cs
	}
	if b.stored != nil {
		return b.stored(cstart, b.table.DataSize(), pool, chunkSize, fn)
	}
	return cas.ReadChunks(b.f, cstart, b.table.DataSize(), pool, chunkSize, fn)
}

// ReadAll decompresses the whole blob into a new slice, each frame in its
// place (no copy).
func (b *Blob) ReadAll(ctx context.Context, pool membuf.BufferPool) ([]byte, error) {
	out := make([]byte, b.size)
	var cstart, dstart int64
	for i := range b.table.Frames() {
		cs, ds := b.table.Entry(i)
		in := membuf.AllocUncleared(pool, int(cs))
		_, err := b.f.ReadAt(in.Bytes(), cstart)
		if err == nil {
			var got []byte
			got, err = b.zp.DecodeFrame(ctx, in.Bytes(), out[dstart:dstart:dstart+ds])
			if (err != nil || int64(len(got)) != ds) && ctx.Err() == nil {
				err = fmt.Errorf("zstdfile: frame %d of %d bytes decoded to %d (%v): %w", i, ds, len(got), err, ErrCorruptFrame)
			}
		}
		in.Free()
		if err != nil {
			return nil, err
		}
		cstart, dstart = cstart+cs, dstart+ds
	}
	return out, nil
}

// compressFrame compresses plain as one frame into a buffer from pool and
// hands it to fn as views of at most chunkSize bytes (no copy).
func compressFrame(ctx context.Context, zp *zstdseek.Pool, plain []byte, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	frame, err := zp.EncodeFrame(ctx, plain, pool)
	if err != nil {
		return err
	}
	return cas.SendViews(frame, 0, int64(frame.Len()), chunkSize, fn)
}

// onTheFlyFrame is the uncompressed size of the frames CompressChunks
// makes for reads of chunkSize bytes: one frame per read chunk, with space
// for zstd's framing so that an incompressible frame still fits the chunk.
// Small frames keep what a read holds small (a frame waiting for an
// encoder, or for the client), which is what bounds memory when hundreds of
// clients read compressed; blobs kept plain are mostly those that do not
// compress, for which a frame's size costs no ratio.
func onTheFlyFrame(chunkSize int) int {
	return min(max(chunkSize-64, 4<<10), zstdseek.FrameSize)
}

// CompressChunks serves BlobReader.ReadZstd for a blob r keeps plain: it
// reads [off, r.Size()) a chunk at a time (onTheFlyFrame), compresses each
// piece as an independent zstd frame with an encoder from zp (waiting for
// one, within ctx, if the budget is spent) and calls fn with the stream as
// ReadZstd does. The frames together decompress to [off, r.Size()).
func CompressChunks(ctx context.Context, zp *zstdseek.Pool, r cas.BlobReader, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if off >= r.Size() {
		return fn(membuf.Wrap(emptyZstdFrame))
	}
	return r.ReadChunks(ctx, off, r.Size(), pool, onTheFlyFrame(chunkSize), func(plain membuf.Buffer) error {
		err := compressFrame(ctx, zp, plain.Bytes(), pool, chunkSize, fn)
		plain.Free()
		return err
	})
}

// WriteRange writes what ReadChunks reads (cas.WriteChunks): the bytes
// come into memory to be decompressed anyway.
func (b *Blob) WriteRange(ctx context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error) {
	return cas.WriteChunks(ctx, b, w, off, end, pool, chunkSize)
}
