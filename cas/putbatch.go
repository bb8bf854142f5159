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

// PutEach stores a batch as Storage.PutBatch says, with one Put per blob
// on s, at most putEachParallelism at once: the PutBatch of a Storage that
// has no cheaper way to store a batch. A blob in more than one piece is
// joined into one slice first.
func PutEach(ctx context.Context, s Storage, ds []Digest, data []net.Buffers, arrived []Encoding) []error {
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
			p := data[i]
			var one []byte
			if len(p) == 1 {
				one = p[0]
			} else {
				for _, b := range p {
					one = append(one, b...)
				}
			}
			errs[i] = s.Put(ctx, d, one, form)
		})
	}
	wg.Wait()
	return errs
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
