package disk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// Integrity at rest. A blob is published only after its hash was checked,
// but a disk can rot, and a file can be changed behind the store's back.
// The disk store therefore re-hashes a blob before serving it unless this
// process has already found it matching its name as it is now:
//
//   - every Open and ReadAll (verifyFile, from Store.open) compares the open file's
//     modification time and size with those it had when last verified; a
//     blob never verified in this process (everything found on disk at
//     start) or modified since is hashed whole first, through the
//     descriptor it is then served from. Blobs this process wrote were
//     hashed on their way in and count as verified as of their commit. The
//     steady state costs one fstat per open;
//   - in the background, at a bounded rate (Scrub), every blob is re-hashed
//     in turn, so that rot in blobs nobody reads is found before
//     FindMissingBlobs vouches for them, and rot that changes no
//     modification time (bit rot) is found during a long run at all.
//
// A blob whose content does not hash to its name is removed (file and
// index entry, under the lock, as eviction does), counted in
// StoreStats.Corrupt and logged; the read that found it gets ErrNotFound,
// never the bytes, and FindMissing reports it missing from then on.
//
// integrity.HashContent is the one place stored content is checked against its name:
// a blob kept compressed is decompressed there, frame by frame, so that what
// is checked is the blob's own SHA-256 (a damaged frame or seek table is
// content that does not match).

// Every read is checked. verifyFile makes sure a blob matched its name once
// in this process (SHA-256); that says nothing of the disk since: a bit
// that rots afterwards, leaving the modification time alone, would be
// served until the scrubber came round, which on a large store takes a
// day. So each stored blob also carries CRC-32Cs of its stored bytes, taken
// when they were hashed (on their way in, or by that first check), and
// every read checks what it read against them before it hands on a byte:
//
//   - a packed blob (at most --pack-max, 1 MiB) is checked against its
//     record's CRC, which the record header holds anyway: a read reads
//     the whole record into one pooled buffer and checks it before any of
//     it is sent (as views of that buffer) or copied out;
//   - a blob in a file of its own has one CRC per integrity.Block bytes,
//     kept in its index entry; reads go in whole blocks, each checked
//     before any of it is sent (integrity.File).
//
// Why a CRC and not SHA-256: package integrity's doc. A block that does
// not match
// removes the blob, as a failed first check does (StoreStats.Corrupt, an
// error in the log), and the read fails with an error wrapping
// ErrNotFound: no read sends a wrong byte, from a file or from a record.
// FindMissingBlobs then reports the blob missing and clients upload it
// again. ErrNotFound, NOT_FOUND on the wire, because that is what makes
// clients recover: Bazel and the REAPI SDK take it as a cache miss and run
// the action, then upload its outputs; DATA_LOSS, the code for corruption,
// fails a Bazel build.
//
// A blob kept compressed has block sums of its file as stored (frames and
// seek table), taken as the file was written or by the first check: a
// compressed read, which sends the stored frames as they are, reads them
// in checked blocks (zstdfile.StoredReader); a plain read decompresses,
// and zstd checks each frame's own checksum (every frame this store
// writes has one), so a damaged frame fails the read there, and removes
// the blob (Store.verdict).
//
// WithoutReadChecks turns this off, for a filesystem that checksums its own
// data (ZFS, btrfs): reads then trust what the first check found.

// WithoutReadChecks makes reads trust the disk once a blob has matched its
// name in this process, instead of checking each block read against the
// CRC-32C taken when it was hashed. For a filesystem that checksums its
// data itself (ZFS, btrfs), where the check would be paid twice.
func WithoutReadChecks() StoreOption {
	return func(s *Store) { s.noReadChecks = true }
}

// errCorrupt marks a blob whose content does not match its name. Callers
// of the store see ErrNotFound: the blob is gone.
var errCorrupt = integrity.ErrCorrupt

// errReplaced: the entry was committed anew (perhaps in the other form,
// plain or compressed) since the caller looked it up and opened its file;
// the file it holds is not the entry's. The caller looks it up again.
var errReplaced = errors.New("entry replaced since it was opened")

// Verification goes down like a read: the store looks the entry up and
// opens it (under its lock), a verdict is taken on the content with no
// lock and nothing changed (fileVerdict, recordVerdict: nil, or
// errCorrupt with what was found), and the store, the lock's owner, acts
// on it: records the entry verified, or drops it from the index and
// removes its file or retires its record (dropCorrupt).

// verifyFile makes sure the content of CAS blob opened (a copy of its
// index entry, taken when it was looked up), open as f (opened with the
// lookup, under the same hold of the lock: f is that entry's file),
// matches its name, re-hashing it unless this process found it matching
// with the modification time it has now (force: re-hash anyway, the
// scrubber). pace, if not nil, is called after each chunk hashed, with its
// length, and may wait (the scrubber's rate). It returns nil, an error
// wrapping ErrNotFound (errCorrupt, or the blob is gone), errReplaced
// (forced only: the entry was replaced or removed since), or the error
// that stopped the check (ctx, I/O). With nil it returns the blob's block
// sums, for its reads to check.
func (s *Store) verifyFile(ctx context.Context, opened entry, f vfs.File, force bool, pace func(int) error) ([]uint32, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if !force && verifiedAsIs(&opened, fi) {
		return opened.Sums, nil // the steady state: no lock, no hashing
	}
	for {
		s.mu.Lock()
		e, ok := s.idx.File(opened.Key)
		if !ok || e.Gen != opened.Gen {
			s.mu.Unlock()
			if force {
				return nil, errReplaced
			}
			// Replaced or removed since the lookup: f is still the
			// file that was opened, checked for this read alone.
			sums, _, n, err := s.fileVerdict(ctx, f, &opened, fi, pace)
			s.mu.Lock()
			s.verifiedBytes += n
			s.mu.Unlock()
			return sums, err
		}
		if !force && verifiedAsIs(e, fi) {
			sums := e.Sums
			s.mu.Unlock()
			return sums, nil
		}
		if v := e.Verifying; v != nil {
			s.mu.Unlock()
			select {
			case <-v.Done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if errors.Is(v.Err, cas.ErrNotFound) {
				return nil, v.Err
			}
			// Verified (look again: the entry holds its sums now), or
			// the verification stopped for its own caller's reasons (its
			// client went away, an I/O error): look again, and verify it
			// ourselves if need be.
			continue
		}
		v := &verification{Done: make(chan struct{})}
		e.Verifying = v
		s.mu.Unlock()
		sums, err := s.verifyFileAs(ctx, v, e, opened, f, fi, pace)
		v.Err = err
		close(v.Done)
		return sums, err
	}
}

// verifiedAsIs reports whether file entry e was found matching its name
// as its file is now (fi): same modification time and size, with sums.
func verifiedAsIs(e *entry, fi os.FileInfo) bool {
	return e.VerifiedAt != 0 && e.VerifiedAt == fi.ModTime().UnixNano() && fi.Size() == e.Stored && e.Sums != nil
}

// verifyFileAs takes the verdict on f, the file of opened (a copy of the
// entry el taken when it was looked up), whose verification v this caller
// owns: el is recorded verified as of fi's modification time if it
// matches and was not replaced since; if not, the verdict is returned
// (corruptEntry), for the caller to act on.
func (s *Store) verifyFileAs(ctx context.Context, v *verification, el *entry, opened entry, f vfs.File, fi os.FileInfo, pace func(int) error) ([]uint32, error) {
	sums, found, n, err := s.fileVerdict(ctx, f, &opened, fi, pace)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.verifiedBytes += n
	el.Verifying = nil
	switch {
	case err == nil && el.Gen == opened.Gen:
		el.VerifiedAt, el.Sums = fi.ModTime().UnixNano(), sums
	case errors.Is(err, errCorrupt):
		err = &corruptEntry{opened, fmt.Errorf("%w: file of %d bytes, content hashes to %q", err, fi.Size(), found)}
	}
	if err != nil {
		return nil, err
	}
	return sums, nil
}

// fileVerdict hashes f, the file of opened, as stored: the verdict on
// its content. It takes no lock and changes nothing. It returns the
// file's block sums, the hash found and the bytes hashed; errCorrupt if
// the content does not match its name (or its length is not the
// entry's), or the error that stopped it.
func (s *Store) fileVerdict(ctx context.Context, f vfs.File, opened *entry, fi os.FileInfo, pace func(int) error) (sums []uint32, found string, n int64, err error) {
	if fi.Size() != opened.Stored {
		return nil, "", 0, errCorrupt // changed length since it was indexed
	}
	found, sums, n, err = integrity.HashContent(ctx, f, integrity.Content{Fn: opened.Key.Fn, Size: opened.Size, Stored: opened.Stored, Zstd: opened.Zstd, Pool: s.zp, Buffers: s.buffers}, pace)
	if err == nil && found != opened.Key.Hash {
		err = errCorrupt
	}
	return sums, found, n, err
}

// verifyRecord makes sure the content of the packed CAS blob opened (a
// copy of its index entry) matches its name, hashing it unless this
// process already has (force: hash anyway, the scrubber), reading it
// through rec, the record open (its segment held); a record replaced since
// it was looked up is checked for that read alone (forced: errReplaced).
// pace is as for verifyFile. A blob that does not match is a verdict
// returned (corruptEntry), for the caller to act on.
func (s *Store) verifyRecord(ctx context.Context, opened entry, rec io.ReaderAt, force bool, pace func(int) error) error {
	s.mu.Lock()
	current, verified := s.isCurrentRecord(opened)
	s.mu.Unlock()
	switch {
	case !current && force:
		return errReplaced
	case current && verified && !force:
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	bp := integrity.Buffers.Get()
	defer integrity.Buffers.Put(bp)
	buf := (*bp)[:opened.Size]
	found := "?"
	_, err := rec.ReadAt(buf, 0)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// Past the end of its file (truncated): lost as surely as one
		// that does not match, and retired the same way, so that it
		// reads missing and can be uploaded again.
		err = integrity.Corrupt("record lies past the end of its segment's file")
	case errors.Is(err, errCorrupt): // its CRC, checked by rec
	case err != nil:
		return fmt.Errorf("disk: re-hashing a packed blob: %w", err)
	default:
		if pace != nil {
			if err := pace(len(buf)); err != nil {
				return err
			}
		}
		found, err = recordVerdict(buf, &opened)
	}
	s.mu.Lock()
	s.verifiedBytes += opened.Size
	current, _ = s.isCurrentRecord(opened)
	switch {
	case !current && force:
		err = errReplaced
	case current && err == nil:
		s.idx.SetVerified(opened.Key)
	}
	s.mu.Unlock()
	if current && err != nil {
		return &corruptEntry{opened, fmt.Errorf("%w: content hashes to %s", err, found)}
	}
	return err
}

// isCurrentRecord reports whether opened is still its key's entry, the
// same record, and whether that was found matching its name; mu held.
func (s *Store) isCurrentRecord(opened entry) (current, verified bool) {
	cur, current := s.currentLocked(opened)
	return current, current && cur.Verified
}

// currentLocked returns a copy of opened's key's entry now, and whether
// that is still the entry of which opened is a copy (taken earlier): the
// same file at the same generation, or the same record; mu held.
func (s *Store) currentLocked(opened entry) (entry, bool) {
	cur, ok := s.idx.Get(opened.Key)
	if !ok || (cur.Seg == nil) != (opened.Seg == nil) {
		return cur, false
	}
	if opened.Seg == nil {
		return cur, cur.Gen == opened.Gen
	}
	return cur, cur.Seg == opened.Seg && cur.Off == opened.Off
}

// isCurrentLocked reports whether opened is still its key's entry
// (currentLocked); mu held.
func (s *Store) isCurrentLocked(opened entry) bool {
	_, ok := s.currentLocked(opened)
	return ok
}

// recordVerdict hashes buf, the data of the packed CAS blob opened: the
// verdict on its content, nil or errCorrupt with the hash found.
func recordVerdict(buf []byte, opened *entry) (found string, err error) {
	found = integrity.SumHex(opened.Key.Fn, buf)
	if found != opened.Key.Hash {
		return found, errCorrupt
	}
	return found, nil
}

// corruptEntry is the verdict that entry e (a copy of its index entry,
// taken when it was opened) is corrupt: what verification or a read
// found. It wraps errCorrupt; the store acts on it (actOn).
type corruptEntry struct {
	e   entry
	err error
}

func (c *corruptEntry) Error() string { return c.err.Error() }
func (c *corruptEntry) Unwrap() error { return c.err }

// actOn acts on err, what opening, verifying or reading an entry
// returned: a verdict of corrupt drops the entry (dropCorrupt) and
// becomes errCorrupt; any other outcome is returned as it is.
func (s *Store) actOn(err error) error {
	if err == nil {
		return nil
	}
	var c *corruptEntry
	if errors.As(err, &c) {
		return s.dropCorrupt(c.e, c.err.Error())
	}
	return err
}

// dropCorrupt acts on the verdict of corrupt on entry opened (a copy of
// the index entry, taken when it was opened): a read that found what it
// read not matching its sums (Store.verdict), a record found cut short or
// not matching its name. It drops opened from the index if it is still
// that entry, removes its file or retires its record, counts and logs
// it, and returns errCorrupt for the read to fail with.
func (s *Store) dropCorrupt(opened entry, detail string) error {
	s.mu.Lock()
	cur, removed := s.currentLocked(opened)
	if removed {
		s.idx.Drop(&cur)
		if opened.Seg == nil {
			s.blobFiles.remove(&opened)
		}
		s.corrupt++
	}
	s.mu.Unlock()
	if removed {
		s.log.Error("blob failed its integrity check: removed", "hash", opened.Key.Hash, "kind", opened.Key.Kind, "size", opened.Size, "packed", opened.Seg != nil, "detail", detail)
		if opened.Seg != nil {
			s.packedBlobs.retire(opened)
		}
	}
	return errCorrupt
}
