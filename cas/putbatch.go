package cas

import (
	"context"
	"net"
	"sync"
)

// putEachParallelism bounds how many blobs of one batch PutEach stores at
// once: each Put of a store that syncs ends in an fsync, which is what a
// batch of small blobs waits on.
const putEachParallelism = 8

// PutEach stores a batch as BlobStore.PutBatch says, with one writer per
// blob on s, at most putEachParallelism at once: the PutBatch of a store
// that has no cheaper way to store a batch. It must not be the PutBatch
// of s itself.
func PutEach(ctx context.Context, s BlobStore, ds []Digest, data []net.Buffers, arrived []Encoding) []error {
	errs := make([]error, len(ds))
	sem := make(chan struct{}, putEachParallelism)
	var wg sync.WaitGroup
	for i, d := range ds {
		form := Uncompressed
		if arrived != nil {
			form = arrived[i]
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = putOne(ctx, s, d, data[i], form)
		})
	}
	wg.Wait()
	return errs
}

// putOne stores blob d, its bytes in pieces, through a writer of s.
func putOne(ctx context.Context, s BlobStore, d Digest, pieces net.Buffers, arrived Encoding) error {
	if d.IsEmpty() {
		return nil
	}
	w, err := s.NewWriter(ctx, d, arrived)
	if err != nil {
		return err
	}
	if _, err := w.WriteBuffers(pieces); err != nil {
		w.Abort()
		return err
	}
	return w.Commit(ctx)
}

// Put stores data as blob d through s.PutBatch, a batch of one: checked
// against d (ErrMismatch otherwise), in one write where the store can.
// Storing a blob that is already present succeeds. Put is done with data
// when it returns.
func Put(ctx context.Context, s BlobStore, d Digest, data []byte, arrived Encoding) error {
	return s.PutBatch(ctx, []Digest{d}, []net.Buffers{{data}}, []Encoding{arrived})[0]
}

// WriteEach writes bufs to w in order, one Write each: the WriteBuffers of
// a BlobWriter that has no cheaper way to take them.
func WriteEach(w BlobWriter, bufs [][]byte) (int64, error) {
	var total int64
	for _, b := range bufs {
		n, err := w.Write(b)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
