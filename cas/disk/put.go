package disk

import (
	"context"
	"fmt"
	"net"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/disk/files"
	"github.com/membuf/membuf/cas/disk/integrity"
	"github.com/membuf/membuf/cas/zstdseek"
)

// writeBlob writes data, checked, to a temporary file, compressed if the
// store's policy and the data say so, and returns it ready to commit as
// blob d.
func (s *Store) writeBlob(d cas.Digest, data net.Buffers, arrived cas.Encoding) (*pendingCommit, error) {
	if s.packable(d.Size) {
		return s.writeRecord(entryKey{kindCAS, d.Hash}, data)
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
	w, err := files.WriteBlob(f, d, data, z)
	if err != nil {
		s.discardTemp(f)
		return nil, err
	}
	e := &entry{key: entryKey{kindCAS, d.Hash}, size: d.Size, stored: w.Stored, zstd: w.Zstd, sums: w.Sums}
	return s.pendingCommit(f, e, 0), nil
}

// PutBatch stores each data[i], the bytes of blob ds[i] in pieces (written
// in order, as writev writes them: a blob received in several buffers is
// stored without joining them), after checking each against its digest,
// with one group commit for all
// of them: the batch costs one round of fsyncs, not one per blob, and no
// goroutine per blob. It returns one error per blob (nil: the blob is
// stored, durably). Its packed blobs' records are written with one
// pwritev. It is done with data when it returns.
// arrived says how each blob arrived; nil: all Uncompressed.
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
		if s.packable(d.Size) { // written together below
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
			ks[j], pieces[j] = entryKey{kindCAS, ds[i].Hash}, data[i]
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
		s.committer.commit(commits...)
	}
	for j, c := range commits {
		errs[which[j]] = c.err
	}
	return errs
}

// GetActionResult returns the serialized ActionResult stored for the action
// digest d, or an error wrapping ErrNotFound.
func (s *Store) GetActionResult(ctx context.Context, d cas.Digest) ([]byte, error) {
	return s.readAll(ctx, entryKey{kindAC, d.Hash}, 0)
}

// PutActionResult stores data, a serialized ActionResult, for the action
// digest d, replacing any earlier entry.
func (s *Store) PutActionResult(_ context.Context, d cas.Digest, data []byte) error {
	if s.maxSize > 0 && int64(len(data)) > s.maxSize {
		return fmt.Errorf("action result of %d bytes: %w", len(data), cas.ErrTooLarge)
	}
	k := entryKey{kindAC, d.Hash}
	if s.packable(int64(len(data))) {
		c, err := s.writeRecord(k, net.Buffers{data})
		if err != nil {
			return err
		}
		s.committer.commit(c)
		return c.err
	}
	return s.putFile(k, data)
}

// putFile writes data to a temporary file and commits it as k.
func (s *Store) putFile(k entryKey, data []byte) error {
	f, err := s.createTemp()
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		s.discardTemp(f)
		return err
	}
	n := int64(len(data))
	return s.commitTemp(f, &entry{key: k, size: n, stored: n, sums: integrity.SumsOf(net.Buffers{data})}, 0)
}
