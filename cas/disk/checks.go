package disk

import (
	"context"
	"errors"
	"fmt"
	"github.com/membuf/membuf/cas/disk/index"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/vfs"
	"github.com/membuf/membuf/cas/zstdseek"
)

// Integrity at rest. A blob is published only after its hash was checked,
// but a disk can rot, and a file can be changed behind the store's back.
// The disk store therefore re-hashes a blob before serving it unless this
// process has already found it matching its name as it is now:
//
//   - every Open and ReadAll (checks.file, from Store.open) compares the open file's
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

// Every read is checked. checks.file makes sure a blob matched its name once
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

// checks gives the verdicts on stored content: whether a blob or a
// packed record matches its name (hashed once per process, and again by
// the scrubber), what a read whose block or record fails its CRC-32C
// does, and what a verdict of corrupt removes. It answers "may this entry
// be served?"; where the entry is and its bytes are the index's and the
// location sides'. It shares the store's lock.
type checks struct {
	mu      *sync.Mutex
	log     *slog.Logger
	idx     *index.Index
	files   *blobFiles   // removes a file found bad
	packs   *packedBlobs // reads a record to hash it, retires one found bad
	zp      *zstdseek.Pool
	buffers membuf.BufferPool
	// noReadChecks: reads trust the disk after a blob's first check
	// (WithoutReadChecks).
	noReadChecks bool

	corrupt  int64 // blobs whose content no longer matched their name, removed
	verified int64 // bytes re-hashed by first reads and the scrubber
}

// file makes sure the content of CAS blob opened (a copy of its index
// entry, taken when it was looked up), open as f (opened with the lookup,
// under the same hold of the lock: f is that entry's file), matches its
// name, re-hashing it unless this process found it matching with the
// modification time it has now (force: re-hash anyway, the scrubber). pace,
// if not nil, is called after each chunk hashed, with its length, and may
// wait (the scrubber's rate). It returns nil, an error wrapping ErrNotFound
// (errCorrupt, or the blob is gone), errReplaced (forced only: the entry
// was replaced or removed since), or the error that stopped the check
// (ctx, I/O). With nil it returns the blob's block sums, for its reads to
// check.
func (c *checks) file(ctx context.Context, opened entry, f vfs.File, force bool, pace func(int) error) ([]uint32, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	if !force && verifiedAsIs(&opened, fi) {
		return opened.Sums, nil // the steady state: no lock, no hashing
	}
	k := opened.Key
	for {
		c.mu.Lock()
		e, ok := c.idx.File(k)
		if !ok || e.Gen != opened.Gen {
			c.mu.Unlock()
			if force {
				return nil, errReplaced
			}
			// Replaced or removed since the lookup: f is still the
			// file that was opened, checked for this read alone.
			return c.hashFile(ctx, nil, nil, opened, f, fi, pace)
		}
		if !force && verifiedAsIs(e, fi) {
			sums := e.Sums
			c.mu.Unlock()
			return sums, nil
		}
		bc := e.Check
		if bc == nil {
			bc = &blobCheck{Done: make(chan struct{})}
			e.Check = bc
			c.mu.Unlock()
			return c.hashFile(ctx, bc, e, opened, f, fi, pace)
		}
		c.mu.Unlock()
		select {
		case <-bc.Done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if errors.Is(bc.Err, cas.ErrNotFound) {
			return nil, bc.Err
		}
		// Checked (look again: the entry holds its sums now), or the
		// check stopped for its own caller's reasons (its client went
		// away, an I/O error): look again, and check it ourselves if need
		// be.
	}
}

// verifiedAsIs reports whether file entry e was found matching its name
// as its file is now (fi): same modification time and size, with sums.
func verifiedAsIs(e *entry, fi os.FileInfo) bool {
	return e.Checked != 0 && e.Checked == fi.ModTime().UnixNano() && fi.Size() == e.Stored && e.Sums != nil
}

// hashFile hashes f, the file of opened (a copy of the entry el taken when
// it was looked up), whose check bc this caller owns, and records the
// outcome: verified as of fi's modification time, or removed if the
// content does not match (and el is still that entry, not replaced by a
// commit since: that one's content was checked on its way in). It returns
// the blob's block sums, taken as it hashed, if it matched. With el and
// bc nil (the entry is no longer opened's) it records nothing.
func (c *checks) hashFile(ctx context.Context, bc *blobCheck, el *entry, opened entry, f vfs.File, fi os.FileInfo, pace func(int) error) ([]uint32, error) {
	k := opened.Key
	var sum string
	var sums []uint32
	var n int64
	var err error
	if fi.Size() != opened.Stored {
		err = errCorrupt // changed length since it was indexed
	} else {
		sum, sums, n, err = integrity.HashContent(ctx, f, integrity.Content{Fn: opened.Key.Fn, Size: opened.Size, Stored: opened.Stored, Zstd: opened.Zstd, Pool: c.zp, Buffers: c.buffers}, pace)
		if err == nil && sum != k.Hash {
			err = errCorrupt
		}
	}

	c.mu.Lock()
	c.verified += n
	if el == nil {
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return sums, nil
	}
	el.Check = nil
	switch {
	case err == nil && el.Gen == opened.Gen:
		el.Checked, el.Sums = fi.ModTime().UnixNano(), sums
	case errors.Is(err, errCorrupt) && c.isFileLocked(el) && el.Gen == opened.Gen:
		c.idx.Drop(el)
		c.files.remove(el)
		c.corrupt++
		c.log.Error("blob failed its integrity check: removed", "hash", k.Hash, "size", opened.Size, "file_size", fi.Size(), "compressed", opened.Zstd, "content_hash", sum, "err", err)
	}
	c.mu.Unlock()
	bc.Err = err
	close(bc.Done)
	if err != nil {
		return nil, err
	}
	return sums, nil
}

// record makes sure the content of the packed CAS blob opened (a copy of
// its index entry) matches its name, hashing it unless this process
// already has (force: hash anyway, the scrubber). Unless force, the caller
// holds opened's segment (Store.open: the record open), and a record
// replaced since it was looked up is checked for that read alone. pace is
// as for file. A blob that does not match is removed, and its record
// retired.
func (c *checks) record(ctx context.Context, opened entry, force bool, pace func(int) error) error {
	c.mu.Lock()
	el, ok := c.idx.Packed(opened.Key)
	current := ok && el.Seg == opened.Seg && el.Off == opened.Off
	if !current && force {
		c.mu.Unlock()
		return errReplaced
	}
	if current && el.Verified && !force {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	bp := integrity.Buffers.Get()
	defer integrity.Buffers.Put(bp)
	buf := (*bp)[:opened.Size]
	var err error
	if force {
		err = c.packs.read(opened, buf)
	} else {
		_, err = opened.Seg.ReadAt(buf, opened.Off) // held by the caller
	}
	switch {
	case errors.Is(err, errReplaced):
		return err
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		// Past the end of its file (truncated): lost as surely as one
		// that does not match, and retired the same way, so that it
		// reads missing and can be uploaded again.
		return c.readFailed(opened, "record lies past the end of its segment's file")
	case err != nil:
		return fmt.Errorf("disk: re-hashing a packed blob: %w", err)
	}
	if pace != nil {
		if err := pace(len(buf)); err != nil {
			return err
		}
	}
	sum := integrity.SumHex(opened.Key.Fn, buf)
	c.mu.Lock()
	c.verified += opened.Size
	el, ok = c.idx.Packed(opened.Key)
	if !ok || el.Seg != opened.Seg || el.Off != opened.Off {
		c.mu.Unlock()
		switch {
		case force:
			return errReplaced
		case sum != opened.Key.Hash:
			return errCorrupt // no longer an entry to remove
		}
		return nil
	}
	if sum != opened.Key.Hash {
		c.idx.Drop(&el)
		c.corrupt++
		c.mu.Unlock()
		c.log.Error("packed blob failed its integrity check: removed", "hash", opened.Key.Hash, "size", opened.Size, "segment", opened.Seg.Seq, "content_hash", sum)
		c.packs.retire(opened)
		return errCorrupt
	}
	c.idx.SetVerified(opened.Key)
	c.mu.Unlock()
	return nil
}

// readFailed is what the store does with the verdict of a read that
// found what it read not matching its sums (Store.verdict), or of a record
// check that found the record cut short: removes the entry opened (a copy of the index entry, taken when it
// was opened) if it is still that entry, counts and logs it, and returns
// errCorrupt for the read to fail with.
func (c *checks) readFailed(opened entry, detail string) error {
	c.mu.Lock()
	removed := c.idx.DropCurrent(opened)
	if removed {
		if opened.Seg == nil {
			c.files.remove(&opened)
		}
		c.corrupt++
	}
	c.mu.Unlock()
	if removed {
		c.log.Error("blob failed the check of a read: removed", "hash", opened.Key.Hash, "kind", opened.Key.Kind, "size", opened.Size, "packed", opened.Seg != nil, "detail", detail)
		if opened.Seg != nil {
			c.packs.retire(opened)
		}
	}
	return errCorrupt
}

// isFileLocked reports whether el is still its key's file entry.
func (c *checks) isFileLocked(el *entry) bool {
	cur, ok := c.idx.File(el.Key)
	return ok && cur == el
}
