package disk

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packs"
	"github.com/membuf/membuf/cas/disk/unnamed"
)

// NewWriter starts writing blob d, a *fileUpload (or, for a blob the
// store packs, a *recordUpload). If the store's policy keeps blobs that
// arrived as arrived compressed, the writer compresses as it writes, unless
// the first frame shows the blob does not compress. The caller must call
// Commit or Abort.
func (s *Store) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if d.Hash == "" {
		return s.newUnnamedWriter(ctx, d.Function, d.Size, arrived)
	}
	if err := integrity.CheckName(d); err != nil {
		return nil, err
	}
	if s.maxSize > 0 && d.Size > s.maxSize {
		return nil, fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
	}
	if s.packedBlobs.packable(d.Size) {
		w, err := s.newRecordWriter(d)
		if err != nil {
			return nil, err // not a nil *recordUpload in a non-nil interface
		}
		return w, nil
	}
	f, err := s.blobFiles.createTemp()
	if err != nil {
		return nil, err
	}
	u := &fileUpload{s: s}
	files.InitWriter(&u.Writer, s.fs, d, f, s.blobFiles.compressor(arrived))
	return u, nil
}

// fileUpload is an upload into a file of its own: the store reserves
// its bytes towards the maximum size before its files.Writer writes them,
// and commits the file the writer's Finish returns.
//
// The bytes it writes count towards the store's maximum size from the
// moment they are written (reserved ahead, in steps of reserveStep, so
// that a stream of small writes does not take the store's lock for each):
// uploads in progress evict stored entries like committed ones do, and can
// never take the disk past the maximum size.
type fileUpload struct {
	files.Writer
	s        *Store
	reserved int64 // bytes of the store's partial ones this upload holds, >= Written
	done     bool  // Commit or Abort was called
}

// reserveStep is how far ahead of what it has written an upload reserves.
const reserveStep = 1 << 20

// reserve reserves what n more bytes need, unless the writer will refuse
// them anyway (past the digest's size, or after Commit or Abort).
func (u *fileUpload) reserve(n int64) error {
	size, written := u.Digest().Size, u.Written()
	if u.done || n > size-written {
		return nil
	}
	if need := written + n; need > u.reserved {
		ahead := min(max(need, u.reserved+reserveStep), size)
		if err := u.s.reserve(ahead - u.reserved); err != nil {
			return err
		}
		u.reserved = ahead
	}
	return nil
}

// Write appends p. Writing past the digest's size fails with ErrMismatch
// and writes nothing; so does one the store has no space for (ErrFull).
func (u *fileUpload) Write(p []byte) (int, error) {
	if err := u.reserve(int64(len(p))); err != nil {
		return 0, err
	}
	return u.Writer.Write(p)
}

// WriteBuffers appends bufs with one writev (files.Writer.WriteBuffers).
func (u *fileUpload) WriteBuffers(bufs [][]byte) (int64, error) {
	var total int64
	for _, b := range bufs {
		total += int64(len(b))
	}
	if err := u.reserve(total); err != nil {
		return 0, err
	}
	return u.Writer.WriteBuffers(bufs)
}

// Suspend closes the temporary file until the next write or Commit, and
// gives back what was reserved ahead of what was written: an upload kept
// idle for resumption holds no descriptor and only its own bytes.
func (u *fileUpload) Suspend() error {
	if !u.done {
		u.s.unreserve(u.reserved - u.Written())
		u.reserved = u.Written()
	}
	return u.Writer.Suspend()
}

// Commit checks that the content matches the digest, then fsyncs it and
// makes it visible (the group commit). On a mismatch or any other error
// nothing is stored and the temporary file is removed.
func (u *fileUpload) Commit(context.Context) error {
	if u.done {
		return errors.New("disk: Commit after Commit or Abort")
	}
	u.done = true
	f, c, err := u.Writer.Finish()
	if err != nil {
		u.s.unreserve(u.reserved)
		return err
	}
	return u.s.commit(u.s.blobFiles.prepare(f, uploaded(c), u.reserved))
}

// Abort discards the upload and gives back its reservation. It is safe to
// call after Commit (it does nothing then).
func (u *fileUpload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.Writer.Abort()
	u.s.unreserve(u.reserved)
}

// recordUpload is an upload into a slot of a pack segment: its
// packs.Writer streams the record, whose Finish returns it for the store
// to commit.
type recordUpload struct {
	packs.Writer
	s *Store
}

// newRecordWriter takes a slot for blob d, evicting to make space for it.
func (s *Store) newRecordWriter(d cas.Digest) (*recordUpload, error) {
	u := &recordUpload{s: s}
	s.packedBlobs.set.InitWriter(&u.Writer, d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, cas.ErrClosed
	}
	if err := s.idx.TakeSlot(u.Slot(), casKey(d), d.Size, false); err != nil {
		return nil, err
	}
	s.evictLocked()
	return u, nil
}

// Commit checks the content against the digest, writes the record's
// committed header (packs.Writer.Finish) and commits the record.
func (u *recordUpload) Commit(context.Context) error {
	d, crc, err := u.Writer.Finish()
	if err != nil {
		return err
	}
	sl := u.Slot()
	return u.s.commit(newRecordCommit(sl.Seg, sl.Off, casKey(d), d.Size, crc))
}

// reserve counts n more bytes of an upload towards the maximum size
// (index.Index.Reserve), removing the files it evicts.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cas.ErrClosed
	}
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

// placeholderHashes name an unnamed blob, by its function, until its
// Commit knows its hash: the reserved header of its pack record carries
// it, which a scan steps over like any reserved record. It has the
// function's length, so that the record's header is the length the named
// one's will be.
var placeholderHashes = func() (p [8]string) { // 8: more functions than there are
	for _, fn := range cas.Functions {
		p[fn] = strings.Repeat("0", fn.HashLen())
	}
	return p
}()

// newUnnamedWriter starts writing a blob of size bytes under function fn
// whose hash is learned as it is written (NewWriter with an empty Hash): a
// writer of NewWriter's, named at Commit by what it hashed on the way, so
// that the content is hashed once.
func (s *Store) newUnnamedWriter(ctx context.Context, fn cas.Function, size int64, arrived cas.Encoding) (cas.BlobWriter, error) {
	if size < 1 {
		return nil, fmt.Errorf("disk: an unnamed blob of %d bytes: the empty blob is always present, and is not written", size)
	}
	if !fn.Valid() {
		return nil, fmt.Errorf("%w: digest function %d is none this store knows", cas.ErrMismatch, fn)
	}
	bw, err := s.NewWriter(ctx, cas.Digest{Hash: placeholderHashes[fn], Size: size, Function: fn}, arrived)
	if err != nil {
		return nil, err
	}
	return unnamed.Wrap(bw, fn, size)
}
