package packs

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packfile"
	"github.com/membuf/membuf/cas/disk/zstdfile"
)

// Blob is an open packed blob: a range of its segment's file, read
// with pread. It keeps the segment's file open until Close, even if the
// segment is evicted meanwhile.
type Blob struct {
	set  *Set
	seg  *Segment
	off  int64 // of the data in the segment
	size int64
	crc  uint32 // the record's
	// checked: every read checks the whole record against crc first.
	checked bool
}

// OpenRecord opens the record of size bytes whose data is at off in seg,
// which the owner found current (so not evicted), holding seg's file until
// the Blob's Close. If checked, every read checks the whole record against
// crc, its CRC, before it hands on a byte, and fails with an error
// wrapping integrity.ErrCorrupt if it does not match (the verdict, which
// the owner acts on: the store removes the entry); if not, reads trust the
// disk (disk.WithoutReadChecks).
func (s *Set) OpenRecord(seg *Segment, off, size int64, crc uint32, checked bool) *Blob {
	s.mu.Lock()
	s.holdLocked(seg)
	s.mu.Unlock()
	return &Blob{set: s, seg: seg, off: off, size: size, crc: crc, checked: checked}
}

// Size returns the blob's size in bytes.
func (b *Blob) Size() int64 { return b.size }

// Stored returns Uncompressed: packed blobs are kept plain.
func (b *Blob) Stored() cas.Encoding { return cas.Uncompressed }

// ReadChunks reads [off, end) with pread, one chunk at a time into a buffer
// from pool; see cas.BlobReader. With reads checked, the whole record (at
// most --pack-max, 1 MiB) is read into one pooled buffer with one pread and
// checked against its CRC before any of it is handed on, as views of that
// buffer (no copy): a client that streams a read to disk never gets a byte
// it would have to know to discard.
func (b *Blob) ReadChunks(_ context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if !b.checked || off >= end {
		return cas.ReadChunks(b, off, end, pool, chunkSize, fn)
	}
	buf := membuf.AllocUncleared(pool, int(b.size)) // filled whole by the read before it is looked at
	if err := b.readChecked(buf.Bytes()); err != nil {
		buf.Free()
		return err
	}
	return cas.SendViews(buf, off, end, chunkSize, fn)
}

// check compares crc, the sum of the whole record as read, with the one
// its header holds, and fails the read if they differ.
func (b *Blob) check(crc uint32) error {
	if crc != b.crc {
		return integrity.Corrupt("record data does not match its CRC-32C")
	}
	return nil
}

// readChecked reads the whole record into p, len(p) == b.size, and checks
// it against the record's CRC. A record that ends past the end of its file
// (the file was truncated) fails as one that does not match: it is as
// lost, and is not coming back.
func (b *Blob) readChecked(p []byte) error {
	if _, err := b.seg.ReadAt(p, b.off); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return integrity.Corrupt("record lies past the end of its segment's file")
	} else if err != nil {
		return fmt.Errorf("disk: reading a packed blob: %w", err)
	}
	return b.check(packfile.Checksum(p))
}

// ReadZstd compresses the blob from off as it reads it.
func (b *Blob) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return zstdfile.CompressChunks(ctx, b.set.cfg.Zstd, b, off, pool, chunkSize, fn)
}

// ReadAt reads the blob's bytes, never past its end: with reads checked,
// the whole record, into p if p takes it all, through a pooled buffer if
// not.
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.size {
		return 0, io.EOF
	}
	short := int64(len(p)) > b.size-off
	if short {
		p = p[:b.size-off]
	}
	var n int
	var err error
	switch {
	case !b.checked:
		n, err = b.seg.ReadAt(p, b.off+off)
	case off == 0 && int64(len(p)) == b.size:
		if err = b.readChecked(p); err == nil {
			n = len(p)
		}
	default:
		bp := integrity.Buffers.Get() // a record is at most 1 MiB, the buffer's size
		if err = b.readChecked((*bp)[:b.size]); err == nil {
			n = copy(p, (*bp)[off:b.size])
		}
		integrity.Buffers.Put(bp)
	}
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// Close lets the segment's file go.
func (b *Blob) Close() error {
	s := b.set
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(b.seg)
	return nil
}

// WriteRange writes what ReadChunks reads (cas.WriteChunks): the bytes
// come into memory to be checked against the record's CRC anyway.
func (b *Blob) WriteRange(ctx context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error) {
	return cas.WriteChunks(ctx, b, w, off, end, pool, chunkSize)
}
