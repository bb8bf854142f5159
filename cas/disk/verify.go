package disk

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/disk/packindex"
	"github.com/membuf/membuf/cas/disk/vfs"
)

// Integrity at rest. A blob is published only after its hash was checked,
// but a disk can rot, and a file can be changed behind the store's back.
// The disk store therefore re-hashes a blob before serving it unless this
// process has already found it matching its name as it is now:
//
//   - every Open and ReadAll (checkBlob, from open) compares the open file's
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

// errCorrupt marks a blob whose content does not match its name. Callers
// of the store see ErrNotFound: the blob is gone.
var errCorrupt = integrity.ErrCorrupt

// blobCheck is a re-hash in progress: others that need the same blob
// checked wait for it instead of hashing it again (a hot blob read by many
// clients just after a restart is hashed once).
type blobCheck struct {
	done chan struct{}
	err  error // set before done is closed
}

// errReplaced: the entry was committed anew (perhaps in the other form,
// plain or compressed) since the caller looked it up and opened its file;
// the file it holds is not the entry's. The caller looks it up again.
var errReplaced = errors.New("entry replaced since it was opened")

// checkBlob makes sure the content of CAS blob opened (a copy of its index
// entry, taken when it was looked up), open as f, matches its name,
// re-hashing it unless this process found it matching with the
// modification time it has now (force: re-hash anyway, the scrubber). pace,
// if not nil, is called after each chunk hashed, with its length, and may
// wait (the scrubber's rate). It returns nil, an error wrapping ErrNotFound
// (errCorrupt, or the blob is gone), errReplaced, or the error that stopped
// the check (ctx, I/O). With nil it returns the blob's block sums, for its
// reads to check (readcheck.go): nil for a blob kept compressed.
func (s *Store) checkBlob(ctx context.Context, opened entry, f vfs.File, force bool, pace func(int) error) ([]uint32, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("disk: %w", err)
	}
	mtime := fi.ModTime()
	k := opened.key
	for {
		s.mu.Lock()
		el, ok := s.files[k]
		if !ok {
			_, packed := s.packedLocked(k)
			s.mu.Unlock()
			if packed {
				return nil, errReplaced // written again since, as a record
			}
			return nil, cas.ErrNotFound // evicted or removed since the lookup
		}
		e := el
		if e.gen != opened.gen {
			s.mu.Unlock()
			return nil, errReplaced
		}
		if !force && e.checked != 0 && e.checked == mtime.UnixNano() && fi.Size() == e.stored && e.sums != nil {
			sums := e.sums
			s.mu.Unlock()
			return sums, nil
		}
		c := e.check
		if c == nil {
			c = &blobCheck{done: make(chan struct{})}
			e.check = c
			s.mu.Unlock()
			return s.runCheck(ctx, c, el, opened, f, fi, pace)
		}
		s.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if errors.Is(c.err, cas.ErrNotFound) {
			return nil, c.err
		}
		// Checked (look again: the entry holds its sums now), or the
		// check stopped for its own caller's reasons (its client went
		// away, an I/O error): look again, and check it ourselves if need
		// be.
	}
}

// runCheck hashes f, the file of opened (a copy of the entry el taken when
// it was looked up), whose check c this caller owns, and records the
// outcome: verified as of fi's modification time, or removed if the
// content does not match (and el is still that entry, not replaced by a
// commit since: that one's content was checked on its way in). It returns
// the blob's block sums, taken as it hashed, if it matched.
func (s *Store) runCheck(ctx context.Context, c *blobCheck, el *entry, opened entry, f vfs.File, fi os.FileInfo, pace func(int) error) ([]uint32, error) {
	e := el
	k := opened.key
	var sum string
	var sums []uint32
	var n int64
	var err error
	if fi.Size() != opened.stored {
		err = errCorrupt // changed length since it was indexed
	} else {
		sum, sums, n, err = integrity.HashContent(ctx, f, integrity.Content{Size: opened.size, Stored: opened.stored, Zstd: opened.zstd, Pool: s.zp, Buffers: s.buffers}, pace)
		if err == nil && sum != k.hash {
			err = errCorrupt
		}
	}

	s.mu.Lock()
	e.check = nil
	s.verified += n
	switch {
	case err == nil && e.gen == opened.gen:
		e.checked, e.sums = fi.ModTime().UnixNano(), sums
	case errors.Is(err, errCorrupt) && s.files[k] == el && e.gen == opened.gen:
		s.removeLocked(el)
		s.corrupt++
		s.log.Error("blob failed its integrity check: removed", "hash", k.hash, "size", opened.size, "file_size", fi.Size(), "compressed", opened.zstd, "content_hash", sum, "err", err)
	}
	s.mu.Unlock()
	c.err = err
	close(c.done)
	if err != nil {
		return nil, err
	}
	return sums, nil
}

// removeLocked unlinks entry el's file, if it has one, and drops it from
// the index.
func (s *Store) removeLocked(el *entry) {
	if e := el; e.seg == nil {
		s.removeFile(e)
	}
	s.dropLocked(el)
}

// dropLocked drops entry el from the index, leaving its bytes where they
// are: a packed entry's stay in its segment until the segment goes.
func (s *Store) dropLocked(e *entry) {
	s.generation.Add(1)
	if e.seg != nil {
		h, _ := packindex.ParseHash(e.key.hash)
		s.packed.Delete(&h, e.key.kind == kindAC)
		s.indexChanged = true
		s.uncountLocked(e)
		return
	}
	if e.el != nil {
		s.lru.Remove(e.el)
		e.el = nil
	}
	delete(s.files, e.key)
	s.uncountLocked(e)
}
