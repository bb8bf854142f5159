package disk

import (
	"context"
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/unnamed"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// NewWriter starts writing blob d, a *files.Writer (or, for a blob the
// store packs, a *packs.Writer). If the store's policy keeps blobs that
// arrived as arrived compressed, the writer compresses as it writes, unless
// the first frame shows the blob does not compress. The caller must call
// Commit or Abort.
func (s *Store) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if d.Hash == "" {
		return s.newUnnamedWriter(ctx, d.Size, arrived)
	}
	if s.maxSize > 0 && d.Size > s.maxSize {
		return nil, fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
	}
	if s.packedBlobs.packable(d.Size) {
		w, err := s.newRecordWriter(d)
		if err != nil {
			return nil, err // not a nil *packs.Writer in a non-nil interface
		}
		return w, nil
	}
	return s.blobFiles.newWriter(d, arrived, files.Hooks{Reserve: s.reserve, Unreserve: s.unreserve, Commit: s.commitUpload})
}

// newRecordWriter takes a slot for blob d, evicting to make space for it:
// a packs.Writer streams its record, committed by commitStreamedRecord.
func (s *Store) newRecordWriter(d cas.Digest) (*packs.Writer, error) {
	w := s.packedBlobs.set.NewWriter(d, s.commitStreamedRecord)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx.Closed() {
		return nil, cas.ErrClosed
	}
	if err := s.idx.TakeSlot(w.Slot(), entryKey{Kind: kindCAS, Hash: d.Hash}, d.Size, false); err != nil {
		return nil, err
	}
	s.evictLocked()
	return w, nil
}

// commitStreamedRecord commits the record of blob d a packs.Writer
// finished in slot sl, its data's CRC-32C crc.
func (s *Store) commitStreamedRecord(sl *packs.Slot, d cas.Digest, crc uint32) error {
	return s.commit(newRecordCommit(sl.Seg, sl.Off, entryKey{Kind: kindCAS, Hash: d.Hash}, d.Size, crc))
}

// commitUpload commits the temporary file f of a files.Writer, its
// content written and checked as c, reserved bytes of it counted.
func (s *Store) commitUpload(f vfs.File, c files.Written, reserved int64) error {
	return s.commit(s.blobFiles.prepare(f, uploaded(c), reserved))
}

// reserve counts n more bytes of an upload towards the maximum size
// (index.Index.Reserve), removing the files it evicts.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	removed, err := s.idx.Reserve(n)
	s.blobFiles.removeAll(removed)
	return err
}

// unreserve gives back n bytes an upload reserved.
func (s *Store) unreserve(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.idx.Unreserve(n)
	s.mu.Unlock()
}

// evictLocked evicts down to the maximum size, removing the files of the
// entries evicted; mu held.
func (s *Store) evictLocked() { s.blobFiles.removeAll(s.idx.Evict(nil, nil)) }

// placeholderHash names an unnamed blob until its Commit knows its hash:
// the reserved header of its pack record carries it, which a scan steps
// over like any reserved record.
var placeholderHash = strings.Repeat("0", 64)

// newUnnamedWriter starts writing a blob of size bytes whose hash is
// learned as it is written (NewWriter with an empty Hash): a writer of
// NewWriter's, named at Commit by what it hashed on the way, so that the
// content is hashed once.
func (s *Store) newUnnamedWriter(ctx context.Context, size int64, arrived cas.Encoding) (cas.BlobWriter, error) {
	if size < 1 {
		return nil, fmt.Errorf("disk: an unnamed blob of %d bytes: the empty blob is always present, and is not written", size)
	}
	bw, err := s.NewWriter(ctx, cas.Digest{Hash: placeholderHash, Size: size}, arrived)
	if err != nil {
		return nil, err
	}
	return unnamed.Wrap(bw, size)
}
