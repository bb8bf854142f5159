package files

import (
	"context"
	"io"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Blob is an open stored blob. Reads at an offset use pread (ReadAt), so an
// offset read never reads and discards. The open file keeps the data
// readable even if the blob is evicted meanwhile (POSIX keeps an unlinked
// file's data until its last descriptor closes).
type Blob struct {
	f    vfs.File // nil for the empty blob
	size int64
	zp   *zstdseek.Pool // for ReadZstd
	// checked reads f block by block against its sums (package
	// integrity); nil: reads are not checked (the empty blob,
	// disk.WithoutReadChecks).
	checked *integrity.File
}

// NewBlob returns the blob of size bytes in f, read through checked if not
// nil; f nil is the empty blob. zp compresses it for ReadZstd. Close closes
// f.
func NewBlob(f vfs.File, size int64, zp *zstdseek.Pool, checked *integrity.File) *Blob {
	return &Blob{f: f, size: size, zp: zp, checked: checked}
}

// Size returns the blob's size in bytes.
func (b *Blob) Size() int64 { return b.size }

// ReadChunks reads [off, end) with pread, one chunk at a time into a buffer
// from pool; see BlobReader.
func (b *Blob) ReadChunks(_ context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if b.checked != nil {
		return b.checked.ReadChunks(off, end, pool, chunkSize, fn)
	}
	return cas.ReadChunks(b, off, end, pool, chunkSize, fn)
}

// Stored returns Uncompressed: the blob is kept plain.
func (b *Blob) Stored() cas.Encoding { return cas.Uncompressed }

// ReadZstd compresses the blob from off as it reads it (zstdfile.CompressChunks).
func (b *Blob) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return zstdfile.CompressChunks(ctx, b.zp, b, off, pool, chunkSize, fn)
}

// WriteRange writes [off, end) from the file to w (vfs.CopyRange:
// sendfile to a TCP connection), with reads checked a step of blocks at a
// time before the step is written (integrity.File.WriteRange); see
// cas.BlobReader. It moves the file's offset, which nothing else reads.
func (b *Blob) WriteRange(_ context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, _ int) (int64, error) {
	switch {
	case b.f == nil || off >= end:
		return 0, nil
	case b.checked != nil:
		return b.checked.WriteRange(w, off, end, pool)
	}
	return vfs.CopyRange(w, b.f, off, end-off)
}

// ReadAt implements io.ReaderAt.
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	switch {
	case b.f == nil:
		return 0, io.EOF
	case b.checked != nil:
		return b.checked.ReadAt(p, off)
	}
	return b.f.ReadAt(p, off)
}

// Close releases the file.
func (b *Blob) Close() error {
	if b.f == nil {
		return nil
	}
	return b.f.Close()
}
