package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Open opens blob d for reading (cas.BlobStore.Open; d.Size -1 names it
// by its hash alone): a *files.Blob, a *packs.Blob or a *zstdfile.Blob,
// inside a *storedBlob when its reads can find it corrupt. It returns an error wrapping ErrNotFound if the blob is not stored. The
// caller must Close it.
func (s *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.Size <= 0 && d.Function.Valid() && d.Hash == d.Function.EmptyHash() {
		return files.NewBlob(nil, 0, s.zp, nil), nil
	}
	r, err := s.open(ctx, casKey(d), d.Size)
	return r, s.actOn(err)
}

// open opens entry k, going down through the store's parts in order: the
// index says where it is (a file or a record) and, in the same hold of
// the lock, the location side opens it (a record's segment held, a file's
// descriptor), so that no commit, eviction or removal comes between; the
// verification says whether it may be served (a blob not yet verified in
// this process is re-hashed first: what open returns has matched its
// name). A blob found corrupt is a verdict returned (corruptEntry), which
// the caller acts on (actOn). The reader checks every block or record it
// reads against the sums verification took, and fails with a verdict the
// store acts on (storedBlob).
func (s *Store) open(ctx context.Context, k entryKey, size int64) (cas.BlobReader, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, cas.ErrClosed
	}
	e, ok := s.idx.Lookup(k, size)
	if !ok {
		s.mu.Unlock()
		return nil, cas.ErrNotFound
	}
	if e.Seg != nil {
		rec := s.segments.OpenRecord(e.Seg, e.Off, e.Size, e.CRC, !s.noReadChecks)
		if e.InOldSegment {
			s.packedBlobs.queueRefresh(e)
		}
		s.mu.Unlock()
		return s.openedRecord(ctx, e, rec)
	}
	f, err := s.blobFiles.open(&e)
	s.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, cas.ErrNotFound // removed behind the store's back
	}
	if err != nil {
		return nil, err
	}
	return s.openedFile(ctx, e, f)
}

// openedRecord returns the reader of packed entry e (a copy of its index
// entry), open as rec: a CAS blob not yet verified in this process is
// hashed first (verifyRecord, through rec's hold of its segment).
func (s *Store) openedRecord(ctx context.Context, e entry, rec *packs.Blob) (cas.BlobReader, error) {
	if e.Key.Kind == kindCAS && !e.Verified {
		if err := s.verifyRecord(ctx, e, rec, false, nil); err != nil {
			rec.Close()
			return nil, err
		}
	}
	if s.noReadChecks {
		return rec, nil // no read gives a verdict
	}
	return &storedBlob{BlobReader: rec, s: s, e: e}, nil
}

// openedFile returns the reader of file entry e (a copy of its index
// entry), open as f: a CAS blob not verified in this process as its file
// is now is hashed first (verifyFile); an action result has no name to
// be checked against, and its reads are checked against the sums it was
// written with, if any (one found at start has none).
func (s *Store) openedFile(ctx context.Context, e entry, f vfs.File) (cas.BlobReader, error) {
	sums := e.Sums
	if e.Key.Kind == kindCAS {
		var err error
		if sums, err = s.verifyFile(ctx, e, f, false, nil); err != nil {
			f.Close()
			return nil, err // found corrupt (ErrNotFound), or the check could not finish
		}
	}
	var checked *integrity.File
	if sums != nil && !s.noReadChecks {
		checked = integrity.NewFile(f, e.Stored, sums)
	}
	if e.Zstd {
		b, err := zstdfile.Open(f, e.Size, s.zp)
		if errors.Is(err, zstdseek.ErrSeekTable) {
			// It matched its name when checked: the disk changed it.
			return nil, &corruptEntry{e, fmt.Errorf("%w: %w", errCorrupt, err)}
		}
		if err != nil {
			s.log.Error("compressed blob unreadable", "hash", e.Key.Hash, "err", err)
			return nil, fmt.Errorf("disk: blob %s: %w", e.Key.Hash, err)
		}
		if checked != nil {
			b.SetStoredReader(checked.ReadChunks)
		}
		// A frame that does not decompress: the disk changed it since
		// it matched its name. Removed, as a block whose CRC fails.
		return &storedBlob{BlobReader: b, s: s, e: e}, nil
	}
	if checked == nil {
		return files.NewBlob(f, e.Size, s.zp, nil), nil // no read gives a verdict
	}
	return &storedBlob{BlobReader: files.NewBlob(f, e.Size, s.zp, checked), s: s, e: e}, nil
}

// ReadActionResult is GetActionResult into memory of pool (cas.ActionResultReader).
func (s *Store) ReadActionResult(ctx context.Context, d cas.Digest, _ cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	r, err := s.open(ctx, acKey(d), 0)
	if err != nil {
		return membuf.Buffer{}, s.actOn(err)
	}
	defer r.Close()
	if b, ok := r.(*storedBlob); ok {
		if z, ok := b.BlobReader.(*zstdfile.Blob); ok {
			all, err := z.ReadAll(ctx, s.buffers)
			return membuf.Wrap(all), s.verdict(&b.e, err)
		}
	}
	rd, ok := r.(io.ReaderAt)
	if !ok {
		return membuf.Buffer{}, fmt.Errorf("disk: reading %s: a %T is no io.ReaderAt", d.Hash, r)
	}
	buf := membuf.AllocUncleared(pool, int(r.Size()))
	// io.ReaderAt may answer a read that reaches the end with io.EOF: an
	// empty action result (all defaults) is such a read.
	if n, err := rd.ReadAt(buf.Bytes(), 0); err != nil && !(errors.Is(err, io.EOF) && n == buf.Len()) {
		return buf, fmt.Errorf("disk: reading %s: %w", d.Hash, err) // freed by the caller all the same
	}
	return buf, nil
}

// storedBlob is a blob as Store.Open returns it when its reads can find
// it corrupt: the reader of its location, and (a copy of) its index entry.
// A read that finds content not matching its sums or frames fails with
// that verdict (integrity.ErrCorrupt, zstdfile.ErrCorruptFrame), and the
// store acts on it (verdict): the entry is removed, and the read fails
// with errCorrupt.
type storedBlob struct {
	cas.BlobReader // a *files.Blob, *packs.Blob or *zstdfile.Blob
	s              *Store
	e              entry
}

// ReadChunks is cas.BlobReader's, the store acting on its verdict.
func (b *storedBlob) ReadChunks(ctx context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return b.s.verdict(&b.e, b.BlobReader.ReadChunks(ctx, off, end, pool, chunkSize, fn))
}

// ReadZstd is cas.BlobReader's, the store acting on its verdict.
func (b *storedBlob) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	return b.s.verdict(&b.e, b.BlobReader.ReadZstd(ctx, off, pool, chunkSize, fn))
}

// WriteRange is cas.BlobReader's, the store acting on its verdict.
func (b *storedBlob) WriteRange(ctx context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error) {
	n, err := b.BlobReader.WriteRange(ctx, w, off, end, pool, chunkSize)
	return n, b.s.verdict(&b.e, err)
}

// ReadAt is the reader's io.ReaderAt (a file's or a record's; a
// compressed blob has none), the store acting on its verdict.
func (b *storedBlob) ReadAt(p []byte, off int64) (int, error) {
	ra, ok := b.BlobReader.(io.ReaderAt)
	if !ok {
		return 0, fmt.Errorf("disk: a %T is no io.ReaderAt", b.BlobReader)
	}
	n, err := ra.ReadAt(p, off)
	return n, b.s.verdict(&b.e, err)
}

// verdict acts on err, what a read of entry e returned: content found not
// matching its sums or frames removes e (dropCorrupt), and the read
// fails with errCorrupt; any other outcome is returned as it is.
func (s *Store) verdict(e *entry, err error) error {
	if err == nil || !errors.Is(err, errCorrupt) && !errors.Is(err, zstdfile.ErrCorruptFrame) {
		return err
	}
	return s.dropCorrupt(*e, err.Error())
}
