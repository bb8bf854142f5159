package server

import (
	"context"
	"fmt"
	"net"

	"github.com/membuf/membuf/cas"
)

// blobSizeLimit is a cas.Storage that accepts no blob larger than max
// (--max-blob-size), whatever the size of the store under it (--max-size):
// its MaxSize is the smaller of the two, which every protocol already
// checks a declared size against before reading a byte (ByteStream
// Write's resource name, the HTTP cache's Content-Length, FetchBlob's
// download) and Capabilities advertises as max_cas_blob_size_bytes; its
// writers refuse a larger blob with cas.ErrTooLarge (INVALID_ARGUMENT,
// HTTP 413), for a caller that did not ask. Reads pass through: a blob
// stored before the limit was lowered is still served.
type blobSizeLimit struct {
	cas.Storage
	max int64
}

// limitBlobSize returns s accepting blobs of at most max bytes; max <= 0,
// or at least s's own MaxSize: s itself.
func limitBlobSize(s cas.Storage, max int64) cas.Storage {
	if inner := s.MaxSize(); max <= 0 || (inner > 0 && max >= inner) {
		return s
	}
	return &blobSizeLimit{Storage: s, max: max}
}

// MaxSize is --max-blob-size.
func (l *blobSizeLimit) MaxSize() int64 { return l.max }

func (l *blobSizeLimit) check(size int64) error {
	if size > l.max {
		return fmt.Errorf("blob of %d bytes: %w: --max-blob-size is %d bytes", size, cas.ErrTooLarge, l.max)
	}
	return nil
}

// NewWriter refuses a blob over the limit before anything is written.
func (l *blobSizeLimit) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if err := l.check(d.Size); err != nil {
		return nil, err
	}
	return l.Storage.NewWriter(ctx, d, arrived)
}

// NewUnnamedWriter refuses a blob over the limit before anything is
// written.
func (l *blobSizeLimit) NewUnnamedWriter(ctx context.Context, size int64, arrived cas.Encoding) (cas.UnnamedWriter, error) {
	if err := l.check(size); err != nil {
		return nil, err
	}
	return l.Storage.NewUnnamedWriter(ctx, size, arrived)
}

// Put refuses a blob over the limit.
func (l *blobSizeLimit) Put(ctx context.Context, d cas.Digest, data []byte, arrived cas.Encoding) error {
	if err := l.check(d.Size); err != nil {
		return err
	}
	return l.Storage.Put(ctx, d, data, arrived)
}

// PutBatch refuses each blob over the limit and passes the others on, in
// one batch.
func (l *blobSizeLimit) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
	errs := make([]error, len(ds))
	var keep []int
	for i, d := range ds {
		if errs[i] = l.check(d.Size); errs[i] == nil {
			keep = append(keep, i)
		}
	}
	if len(keep) == len(ds) {
		return l.Storage.PutBatch(ctx, ds, data, arrived)
	}
	if len(keep) == 0 {
		return errs
	}
	kd, kdata := make([]cas.Digest, len(keep)), make([]net.Buffers, len(keep))
	var karrived []cas.Encoding
	if arrived != nil {
		karrived = make([]cas.Encoding, len(keep))
	}
	for j, i := range keep {
		kd[j], kdata[j] = ds[i], data[i]
		if arrived != nil {
			karrived[j] = arrived[i]
		}
	}
	for j, err := range l.Storage.PutBatch(ctx, kd, kdata, karrived) {
		errs[keep[j]] = err
	}
	return errs
}

// PutActionResult refuses an action result over the limit.
func (l *blobSizeLimit) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	if err := l.check(int64(len(data))); err != nil {
		return err
	}
	return l.Storage.PutActionResult(ctx, d, data)
}
