package disk

import (
	"context"
	"fmt"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

func (s *Store) createTemp() (vfs.File, error) {
	if s.isClosed() {
		return nil, cas.ErrClosed
	}
	return s.fs.CreateTemp(s.tmpDir, "upload-*")
}

// discardTemp closes and removes a temporary file.
func (s *Store) discardTemp(f vfs.File) {
	f.Close()
	s.fs.Remove(f.Name())
}

// commitTemp makes the temporary file f, whose content is complete and
// checked, the entry k, durably: through the group commit (groupcommit.go),
// which fsyncs f, renames it into place, indexes the entry, evicts down to
// the maximum size and fsyncs the directory, for every file committed at
// about the same time at once. reserved is what a Writer reserved for f's
// bytes: it becomes the entry's size in the same locked step, or is
// released on error. On error f is removed.
func (s *Store) commitTemp(f vfs.File, e *entry, reserved int64) error {
	c := s.pendingCommit(f, e, reserved)
	s.committer.commit(c)
	return c.err
}

// pendingCommit prepares f for the group commit as entry e (its key, sizes
// and form), which the commit takes over.
func (s *Store) pendingCommit(f vfs.File, e *entry, reserved int64) *pendingCommit {
	// The content was checked on its way in: as of this modification time
	// it is verified (verify.go). Without it, the first read re-hashes.
	if fi, err := f.Stat(); err == nil {
		e.checked = fi.ModTime().UnixNano()
	}
	return &pendingCommit{f: f, e: e, reserved: reserved}
}

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
	if s.packable(d.Size) {
		return s.newPackWriter(d)
	}
	f, err := s.createTemp()
	if err != nil {
		return nil, err
	}
	var z *zstdseek.FrameCompressor
	if s.policy.compresses(arrived) {
		c := zstdseek.NewFrameCompressor(s.zp, s.buffers)
		z = &c
	}
	return files.NewWriter(s.fs, d, f, z, files.Hooks{
		Reserve:   s.reserve,
		Unreserve: s.unreserve,
		Commit: func(f vfs.File, c files.Written, reserved int64) error {
			e := &entry{key: entryKey{kindCAS, c.Digest.Hash}, size: c.Digest.Size, stored: c.Stored, zstd: c.Zstd, sums: c.Sums}
			return s.commitTemp(f, e, reserved)
		},
	}), nil
}

// reserve counts n more bytes of uploads in progress towards the maximum
// size, evicting stored entries to make room. If the uploads in progress
// alone would take more than the maximum size it fails with ErrFull.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cas.ErrClosed
	}
	if s.maxSize > 0 && s.partial+n > s.maxSize {
		return fmt.Errorf("%w (%d of %d bytes)", cas.ErrFull, s.partial, s.maxSize)
	}
	s.partial += n
	s.evictLocked(nil)
	return nil
}

// unreserve gives back n bytes reserved.
func (s *Store) unreserve(n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.partial -= n
	s.mu.Unlock()
}
