package decorator

import (
	"context"
	"fmt"
	"net"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// SizeLimit is a cas.Storage that accepts no blob or action result larger
// than Max bytes (--max-blob-size), whatever the size of the store under
// it: its writers refuse a larger blob with cas.ErrTooLarge
// (INVALID_ARGUMENT, HTTP 413) before anything is written, for a caller
// that did not check the declared size first (the protocols do, against
// the same figure in their Options). Reads pass through: a blob stored
// before the limit was lowered is still served.
type SizeLimit struct {
	cas.Storage
	Max int64
}

// LimitSize returns s accepting entries of at most max bytes; max <= 0:
// s itself.
func LimitSize(s cas.Storage, max int64) cas.Storage {
	if max <= 0 {
		return s
	}
	return &SizeLimit{Storage: s, Max: max}
}

func (l *SizeLimit) check(size int64) error {
	if size > l.Max {
		return fmt.Errorf("an entry of %d bytes: %w: the limit is %d bytes", size, cas.ErrTooLarge, l.Max)
	}
	return nil
}

// NewWriter refuses a blob over the limit, named or not, before anything
// is written.
func (l *SizeLimit) NewWriter(ctx context.Context, d cas.Digest, arrived cas.Encoding) (cas.BlobWriter, error) {
	if err := l.check(d.Size); err != nil {
		return nil, err
	}
	return l.Storage.NewWriter(ctx, d, arrived)
}

// PutBatch refuses each blob over the limit and passes the others on, in
// one batch.
func (l *SizeLimit) PutBatch(ctx context.Context, ds []cas.Digest, data []net.Buffers, arrived []cas.Encoding) []error {
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
func (l *SizeLimit) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	if err := l.check(int64(len(data))); err != nil {
		return err
	}
	return l.Storage.PutActionResult(ctx, d, data)
}

// ActionCache returns ac, an action cache over this limit's store (an
// instance's, with its own age limit), with its results held to the
// limit.
func (l *SizeLimit) ActionCache(ac cas.ActionCache) cas.ActionCache {
	return limitedResults{ac, l}
}

type limitedResults struct {
	cas.ActionCache
	l *SizeLimit
}

func (r limitedResults) PutActionResult(ctx context.Context, d cas.Digest, data []byte) error {
	if err := r.l.check(int64(len(data))); err != nil {
		return err
	}
	return r.ActionCache.PutActionResult(ctx, d, data)
}

// ReadActionResult passes the read down (cas.ActionResultReader): a
// limit is on what is stored.
func (l *SizeLimit) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	return cas.ReadActionResult(ctx, l.Storage, d, lookup, pool)
}

func (r limitedResults) ReadActionResult(ctx context.Context, d cas.Digest, lookup cas.Lookup, pool membuf.BufferPool) (membuf.Buffer, error) {
	return cas.ReadActionResult(ctx, r.ActionCache, d, lookup, pool)
}
