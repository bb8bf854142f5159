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
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Open opens blob d for reading (cas.BlobStore.Open; d.Size -1 names it
// by its hash alone): a *files.Blob, a *packs.Blob or a *zstdfile.Blob.
// It returns an error wrapping ErrNotFound if the blob is not stored. The
// caller must Close it.
func (s *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.Hash == cas.EmptyHash && d.Size <= 0 {
		return files.NewBlob(nil, 0, s.zp, nil), nil
	}
	return s.open(ctx, entryKey{Kind: kindCAS, Hash: d.Hash}, d.Size)
}

// open opens entry k, going down through the store's parts in order: the index says
// where it is (a file or a record), the location side opens it, the checks
// say whether it may be served (a blob not yet verified in this process is
// re-hashed first: what open returns has matched its name), and the
// reader checks every block or record it reads against the sums the check
// took.
func (s *Store) open(ctx context.Context, k entryKey, size int64) (cas.BlobReader, error) {
	if s.closed() {
		return nil, cas.ErrClosed
	}
	var e entry
	var f vfs.File
	var sums []uint32
	// A blob can be committed again, in the other form (plain or
	// compressed, file or record), between its lookup and its open: then
	// its file is gone, or the check finds the entry replaced, and the
	// lookup is done again.
	for attempt := 0; ; attempt++ {
		var ok bool
		e, ok = s.lookup(k, size)
		if !ok {
			return nil, cas.ErrNotFound
		}
		var err error
		if e.Seg != nil {
			var b cas.BlobReader
			if k.Kind == kindCAS && !e.Verified {
				// Not yet found matching its name in this process (a
				// lookup's copy says so: one verified since is skipped
				// by the check, which looks again).
				err = s.checks.record(ctx, e, false, nil)
			}
			if err == nil {
				b, err = s.openRecord(e)
			}
			switch {
			case err == nil:
				return b, nil
			case errors.Is(err, errReplaced) && attempt < 2:
				continue
			case errors.Is(err, errReplaced):
				return nil, cas.ErrNotFound // replaced or evicted under us, again and again
			}
			return nil, err
		}
		f, err = s.blobFiles.open(&e)
		if errors.Is(err, fs.ErrNotExist) {
			if attempt < 2 {
				continue
			}
			return nil, cas.ErrNotFound // evicted between the lookup and the open
		}
		if err != nil {
			return nil, err
		}
		if k.Kind == kindAC {
			// An action result can be replaced by one of another size
			// between the lookup and the open: the open file is the one
			// to believe.
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, err
			}
			e.Size = fi.Size()
			sums = s.checks.actionResultSums(e, fi)
			break
		}
		sums, err = s.checks.file(ctx, e, f, false, nil)
		if err == nil {
			break
		}
		f.Close()
		if !errors.Is(err, errReplaced) || attempt >= 2 {
			// Found corrupt (ErrNotFound), or the check could not finish.
			return nil, err
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
			return nil, s.checks.readFailed(e, err.Error())
		}
		if err != nil {
			s.log.Error("compressed blob unreadable", "hash", k.Hash, "err", err)
			return nil, fmt.Errorf("disk: blob %s: %w", k.Hash, err)
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

func (s *Store) readAll(ctx context.Context, k entryKey, size int64) ([]byte, error) {
	r, err := s.open(ctx, k, size)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if b, ok := r.(*storedBlob); ok {
		if z, ok := b.BlobReader.(*zstdfile.Blob); ok {
			all, err := z.ReadAll(ctx, s.buffers)
			return all, s.verdict(&b.e, err)
		}
	}
	rd, ok := r.(io.ReaderAt)
	if !ok {
		return nil, fmt.Errorf("disk: reading %s: a %T is no io.ReaderAt", k.Hash, r)
	}
	buf := make([]byte, r.Size())
	// io.ReaderAt may answer a read that reaches the end with io.EOF:
	// the whole of an empty action result (an ActionResult of defaults
	// serializes to no bytes) is such a read.
	if n, err := rd.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, fmt.Errorf("disk: reading %s: %w", k.Hash, err)
	}
	return buf, nil
}

// openRecord opens the packed entry of which e is a copy (its content
// checked already, if a CAS blob: checks.record), its reads checked
// against its CRC unless WithoutReadChecks. It returns errReplaced if the
// entry was replaced or evicted meanwhile.
func (s *Store) openRecord(e entry) (cas.BlobReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.idx.IsCurrent(e) {
		return nil, errReplaced
	}
	b := s.packedBlobs.set.OpenLocked(e.Seg, e.Off, e.Size, e.CRC, !s.noReadChecks)
	if s.noReadChecks {
		return b, nil // no read gives a verdict
	}
	return &storedBlob{BlobReader: b, s: s, e: e}, nil
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
// matching its sums or frames removes e (checks.readFailed), and the read
// fails with errCorrupt; any other outcome is returned as it is.
func (s *Store) verdict(e *entry, err error) error {
	if err == nil || !errors.Is(err, errCorrupt) && !errors.Is(err, zstdfile.ErrCorruptFrame) {
		return err
	}
	return s.checks.readFailed(*e, err.Error())
}
