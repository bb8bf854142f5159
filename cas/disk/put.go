package disk

import (
	"context"
	"fmt"
	"net"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/integrity"
)

// writeBlob writes data, checked, as blob d: a record if the store packs
// blobs its size, else a temporary file (blobFiles.write); it returns it
// ready to commit.
func (s *Store) writeBlob(d cas.Digest, data net.Buffers, arrived cas.Encoding) (*pendingCommit, error) {
	if s.packedBlobs.packable(d.Size) {
		return s.writeRecord(casKey(d), data)
	}
	return s.blobFiles.write(d, data, arrived)
}

// writeRecord writes data, complete and checked, as a committed record
// of k into a new slot, and returns it ready for the group commit.
func (s *Store) writeRecord(k entryKey, data net.Buffers) (*pendingCommit, error) {
	var cs [1]*pendingCommit // on the stack: Put's path allocates no slices
	var errs [1]error
	s.writeRecords([]entryKey{k}, []net.Buffers{data}, cs[:], errs[:])
	return cs[0], errs[0]
}

// writeRecords writes each data[i], complete and checked, as a committed
// record of ks[i], and sets cs[i] to it ready for the group commit, or
// errs[i] to why not. Their slots are taken in one hold of the lock, so
// that they are consecutive, and evictions make space for them there; the
// records are written with one pwritev (packs.Set.WriteFills): a batch's
// records cost one system call, not two each, and none under the lock.
func (s *Store) writeRecords(ks []entryKey, data []net.Buffers, cs []*pendingCommit, errs []error) {
	fills := s.packedBlobs.fills(ks, data, cs)
	taken := fills[:0]
	s.mu.Lock()
	for i, f := range fills {
		err := cas.ErrClosed
		if !s.closed {
			err = s.idx.TakeSlot(f.Slot, ks[i], cs[i].e.Size, true)
		}
		if err != nil {
			errs[i], cs[i] = err, nil
			continue
		}
		cs[i].seg, cs[i].e.Seg, cs[i].e.Off = f.Slot.Seg, f.Slot.Seg, f.Slot.Off
		taken = append(taken, f)
	}
	if len(taken) > 0 {
		s.evictLocked()
	}
	s.mu.Unlock()
	if failed := s.packedBlobs.writeFills(taken, cs, errs); failed != nil {
		s.mu.Lock()
		for _, seg := range failed {
			// A record that will not be committed: its slot goes back.
			s.packedBlobs.set.ReleaseSlot(seg)
		}
		s.mu.Unlock()
	}
}

// commit makes c durable and visible through the group commit, and
// returns how it ended.
func (s *Store) commit(c *pendingCommit) error {
	s.commitAll(c)
	return c.err
}

// PutBatch stores each data[i], the bytes of blob ds[i] in pieces (written
// in order, as writev writes them: a blob received in several buffers is
// stored without joining them), after checking each against its digest,
// with one group commit for all of them: the batch costs one round of
// fsyncs, not one per blob, and no goroutine per blob. It returns one
// error per blob (nil: the blob is stored, durably). Its packed blobs'
// records are written with one pwritev. It is done with data when it
// returns. arrived says how each blob arrived; nil: all Uncompressed.
func (s *Store) PutBatch(_ context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	errs := make([]error, len(ds))
	var commits []*pendingCommit
	var which []int  // index in ds of each commit
	var packed []int // index in ds of each blob to pack
	for i, d := range ds {
		if err := integrity.CheckData(d, data[i]); err != nil {
			errs[i] = err
			continue
		}
		if s.contains(d) {
			continue
		}
		if s.maxSize > 0 && d.Size > s.maxSize {
			errs[i] = fmt.Errorf("blob %s: %w (%d bytes)", d, cas.ErrTooLarge, s.maxSize)
			continue
		}
		if s.packedBlobs.packable(d.Size) { // written together below
			packed = append(packed, i)
			continue
		}
		form := cas.Uncompressed
		if arrived != nil {
			form = arrived[i]
		}
		c, err := s.writeBlob(d, data[i], form)
		if err != nil {
			errs[i] = err
			continue
		}
		commits = append(commits, c)
		which = append(which, i)
	}
	if len(packed) > 0 {
		// The packed blobs' records in consecutive slots, with one pwritev.
		ks := make([]entryKey, len(packed))
		pieces := make([]net.Buffers, len(packed))
		for j, i := range packed {
			ks[j], pieces[j] = casKey(ds[i]), data[i]
		}
		cs, werrs := make([]*pendingCommit, len(packed)), make([]error, len(packed))
		s.writeRecords(ks, pieces, cs, werrs)
		for j, i := range packed {
			if werrs[j] != nil {
				errs[i] = werrs[j]
				continue
			}
			commits = append(commits, cs[j])
			which = append(which, i)
		}
	}
	if len(commits) > 0 {
		s.commitAll(commits...)
	}
	for j, c := range commits {
		errs[which[j]] = c.err
	}
	return errs
}

// GetActionResult is cas.ActionCache's: ReadActionResult into fresh memory.
func (s *Store) GetActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup) ([]byte, error) {
	b, err := s.ReadActionResult(ctx, d, lookup, nil)
	defer b.Free() // memory of no pool: its bytes stay valid
	return b.Bytes(), err
}

// PutActionResult stores data, a serialized ActionResult, for the action
// digest d, replacing any earlier entry.
func (s *Store) PutActionResult(_ context.Context, d cas.Digest, data []byte) error {
	if err := integrity.CheckName(d); err != nil {
		return err
	}
	if s.maxSize > 0 && int64(len(data)) > s.maxSize {
		return fmt.Errorf("action result of %d bytes: %w", len(data), cas.ErrTooLarge)
	}
	k := acKey(d)
	var c *pendingCommit
	var err error
	if s.packedBlobs.packable(int64(len(data))) {
		c, err = s.writeRecord(k, net.Buffers{data})
	} else {
		c, err = s.blobFiles.put(k, data)
	}
	if err != nil {
		return err
	}
	return s.commit(c)
}
