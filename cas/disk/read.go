package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

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
	return s.open(ctx, entryKey{kindCAS, d.Hash}, d.Size)
}

// open opens entry k. A blob not yet verified in this process is re-hashed
// first (verify.go): what it returns has matched its name.
func (s *Store) open(ctx context.Context, k entryKey, size int64) (cas.BlobReader, error) {
	if s.isClosed() {
		return nil, cas.ErrClosed
	}
	var e entry
	var f vfs.File
	var sums []uint32
	// A blob can be committed again, in the other form (plain or
	// compressed), between its lookup and its open: then its file is gone,
	// or the check finds the entry replaced, and the lookup is done again.
	for attempt := 0; ; attempt++ {
		// A read need not wait for the entry's rename to be durable: its
		// content is, and a reader that outlives a crash is no more.
		var ok bool
		e, ok = s.lookupPending(k, size)
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
		f, err = s.fs.Open(s.filePath(&e))
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
	var checked *integrity.File
	if sums != nil && !s.noReadChecks {
		checked = integrity.NewFile(f, e.stored, sums, func(detail string) error { return s.readFailed(e, detail) })
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
	return files.NewBlob(f, e.size, s.zp, checked), nil
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

func (s *Store) readAll(ctx context.Context, k entryKey, size int64) ([]byte, error) {
	r, err := s.open(ctx, k, size)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if b, ok := r.(*zstdfile.Blob); ok {
		return b.ReadAll(ctx, s.buffers)
	}
	rd, ok := r.(io.ReaderAt)
	if !ok {
		return nil, fmt.Errorf("disk: reading %s: a %T is no io.ReaderAt", k.hash, r)
	}
	buf := make([]byte, r.Size())
	// io.ReaderAt may answer a read that reaches the end with io.EOF:
	// the whole of an empty action result (an ActionResult of defaults
	// serializes to no bytes) is such a read.
	if n, err := rd.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(buf)) {
		return nil, fmt.Errorf("disk: reading %s: %w", k.hash, err)
	}
	return buf, nil
}
