package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/zstdfile"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Blob is an open stored blob. Reads at an offset use pread (ReadAt), so an
// offset read never reads and discards. The open file keeps the data
// readable even if the blob is evicted meanwhile (POSIX keeps an unlinked
// file's data until its last descriptor closes).
type Blob struct {
	f    *os.File // nil for the empty blob
	size int64
	zp   *zstdseek.Pool // for ReadZstd
	// checked reads f block by block against its sums (readcheck.go);
	// nil: reads are not checked (the empty blob, WithoutReadChecks).
	checked *checkedFile
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

// Open opens blob d for reading, a *Blob. It returns an error wrapping
// ErrNotFound if the blob is not stored. The caller must Close it.
func (s *Store) Open(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.IsEmpty() {
		return &Blob{zp: s.zp}, nil
	}
	return s.open(ctx, entryKey{kindCAS, d.Hash}, d.Size, true)
}

// OpenUncounted is Open for the server's own reads, such as copying a blob
// to another tier: the lookup is not counted in Stats.
func (s *Store) OpenUncounted(ctx context.Context, d cas.Digest) (cas.BlobReader, error) {
	if d.IsEmpty() {
		return &Blob{zp: s.zp}, nil
	}
	return s.open(ctx, entryKey{kindCAS, d.Hash}, d.Size, false)
}

// open opens entry k. A blob not yet verified in this process is re-hashed
// first (verify.go): what it returns has matched its name. count says
// whether the lookup is a client's.
func (s *Store) open(ctx context.Context, k entryKey, size int64, count bool) (cas.BlobReader, error) {
	if s.isClosed() {
		return nil, cas.ErrClosed
	}
	var e entry
	var f *os.File
	var sums []uint32
	// A blob can be committed again, in the other form (plain or
	// compressed), between its lookup and its open: then its file is gone,
	// or the check finds the entry replaced, and the lookup is done again.
	for attempt := 0; ; attempt++ {
		// A read need not wait for the entry's rename to be durable: its
		// content is, and a reader that outlives a crash is no more.
		var ok bool
		e, ok = s.lookupPending(k, size, count && attempt == 0)
		if !ok {
			return nil, cas.ErrNotFound
		}
		if e.seg != nil {
			b, err := s.openPacked(ctx, e)
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
		var err error
		f, err = os.Open(s.filePath(&e))
		if errors.Is(err, fs.ErrNotExist) {
			if attempt < 2 {
				continue
			}
			return nil, cas.ErrNotFound // evicted between the lookup and the open
		}
		if err != nil {
			return nil, err
		}
		if k.kind == kindAC {
			// An action result can be replaced by one of another size
			// between the lookup and the open: the open file is the one
			// to believe.
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, err
			}
			e.size = fi.Size()
			// Its sums, if this process wrote it; one written before
			// the start has no name to be checked against, and none.
			sums = s.actionResultSums(e, fi)
			break
		}
		sums, err = s.checkBlob(ctx, e, f, false, nil)
		if err == nil {
			break
		}
		f.Close()
		if !errors.Is(err, errReplaced) || attempt >= 2 {
			// Found corrupt (ErrNotFound), or the check could not finish.
			return nil, err
		}
	}
	var checked *checkedFile
	if sums != nil && !s.noReadChecks {
		checked = &checkedFile{f: f, size: e.stored, sums: sums, s: s, opened: e}
	}
	if e.zstd {
		b, err := zstdfile.Open(f, e.size, s.zp)
		if errors.Is(err, zstdseek.ErrSeekTable) {
			// It matched its name when checked: the disk changed it.
			return nil, s.readFailed(e, err.Error())
		}
		if err != nil {
			s.log.Error("compressed blob unreadable", "hash", k.hash, "err", err)
			return nil, fmt.Errorf("disk: blob %s: %w", k.hash, err)
		}
		if checked != nil {
			b.SetStoredReader(checked.ReadChunks)
		}
		// A frame that does not decompress: the disk changed it since
		// it matched its name. Removed, as a block whose CRC fails.
		b.SetCorruptHandler(func(err error) error { return s.readFailed(e, err.Error()) })
		return b, nil
	}
	return &Blob{f: f, size: e.size, zp: s.zp, checked: checked}, nil
}

// actionResultSums returns the block sums of the action result file of e,
// open with fi, if its entry has sums and is still that file (same
// generation and size); nil otherwise.
func (s *Store) actionResultSums(e entry, fi os.FileInfo) []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.files[e.key]; ok {
		if cur := el; cur.gen == e.gen && cur.seg == nil && cur.stored == fi.Size() {
			return cur.sums
		}
	}
	return nil
}

// ReadAll returns the whole content of blob d.
func (s *Store) ReadAll(ctx context.Context, d cas.Digest) ([]byte, error) {
	if d.IsEmpty() {
		return []byte{}, nil
	}
	return s.readAll(ctx, entryKey{kindCAS, d.Hash}, d.Size)
}

func (s *Store) readAll(ctx context.Context, k entryKey, size int64) ([]byte, error) {
	r, err := s.open(ctx, k, size, true)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rd io.ReaderAt
	switch b := r.(type) {
	case *zstdfile.Blob:
		return b.ReadAll(ctx, s.buffers)
	case *packedBlob:
		rd = b
	default:
		rd = b.(*Blob)
	}
	buf := make([]byte, r.Size())
	if _, err := rd.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("disk: reading %s: %w", k.hash, err)
	}
	return buf, nil
}
