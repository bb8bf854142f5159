package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
)

// A fill copies one blob from the backend into the disk tier: one GET of the
// whole object, streamed in chunks into a disk store writer (which hashes
// as it writes and commits, through the disk store's own commit path, only
// if size and SHA-256 match). It runs on a goroutine of its own under the
// Store's context, not a client's (it carries the starting read's values,
// a trace's span, but not its end): a client that goes away neither
// corrupts nor abandons it. Concurrent readers of one missing blob share
// one fill (Store.fills), and all read from disk once it has committed: no
// byte reaches a client before the whole blob is checked, since a client
// that got bytes of a blob that then failed its check could resume its
// read at their end and stitch the right rest onto them.
type fill struct {
	d         cas.Digest
	pool      membuf.BufferPool
	chunkSize int
	// origin is the context of the read that started the fill, without
	// its cancellation: its values (a trace's span) go with the fill's
	// requests to the backend; its end does not stop the fill.
	origin context.Context

	done chan struct{} // closed when the fill has ended
	err  error         // why it failed; set before done closes
}

// joinFill returns the fill of d, starting one if none is running, with
// ctx's values (not its cancellation) for its requests to the backend.
func (t *Store) joinFill(ctx context.Context, d cas.Digest) *fill {
	t.fillMu.Lock()
	defer t.fillMu.Unlock()
	if f := t.fills[d]; f != nil {
		return f
	}
	f := &fill{d: d, pool: t.cfg.Pool, chunkSize: t.cfg.ChunkSize, origin: context.WithoutCancel(ctx), done: make(chan struct{})}
	t.fills[d] = f
	t.wg.Add(1)
	go t.runFill(f)
	return f
}

func (t *Store) runFill(f *fill) {
	defer t.wg.Done()
	err := t.fillOnce(f)
	t.fillMu.Lock()
	delete(t.fills, f.d)
	t.fillMu.Unlock()
	if err != nil {
		t.c.fillsFailed.Add(1)
		if errors.Is(err, cas.ErrNotFound) {
			// Gone from the backend: FindMissing and the action results'
			// checks must not go on calling it present.
			t.exists.Absent(f.d)
		}
		t.log.Warn("tier: fill from the backend failed", "digest", f.d.String(), "err", err)
	} else {
		t.c.fills.Add(1)
		t.exists.Set(f.d, true)
	}
	f.err = err
	close(f.done)
}

// fillOnce does the fill's work; see fill.
func (t *Store) fillOnce(f *fill) error {
	k := BlobKey(f.d)
	ctx, cancel := context.WithCancelCause(f.origin)
	defer cancel(nil)
	defer context.AfterFunc(t.ctx, func() { cancel(context.Cause(t.ctx)) })()
	// The transfer must make progress: the watchdog cancels it when no
	// byte arrived for RequestTimeout (a stalled or very slow backend).
	stall := time.AfterFunc(t.cfg.RequestTimeout, func() {
		cancel(fmt.Errorf("no progress for %v", t.cfg.RequestTimeout))
	})
	defer stall.Stop()

	w, err := t.local.NewWriter(ctx, f.d, cas.Uncompressed)
	if err != nil {
		return err
	}
	defer w.Abort() // a no-op after Commit
	obj, err := t.backend.Get(ctx, k, 0)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	if obj.Size != f.d.Size {
		t.c.corrupt.Add(1)
		t.exists.MarkBad(f.d)
		return fmt.Errorf("%w: the object for %s in the backend is %d bytes, not %d (corrupt; not served)", cas.ErrNotFound, f.d, obj.Size, f.d.Size)
	}
	for off := int64(0); off < f.d.Size; {
		n := int(min(int64(f.chunkSize), f.d.Size-off))
		chunk := membuf.Alloc(f.pool, n)
		m, err := io.ReadFull(obj.Body, chunk.Bytes())
		t.c.bytesDown.Add(uint64(m))
		if err != nil {
			chunk.Free()
			if ctx.Err() != nil {
				err = fmt.Errorf("%w (%v)", err, context.Cause(ctx))
			}
			return &RequestError{Kind: cas.ErrUnavailable, Public: fmt.Sprintf("reading %s from the shared tier stopped at byte %d", f.d, off+int64(m)), Where: t.cfg.Name, Cause: err}
		}
		stall.Reset(t.cfg.RequestTimeout)
		_, err = w.Write(chunk.Bytes())
		chunk.Free()
		if err != nil {
			return err
		}
		off += int64(n)
	}
	if err := w.Commit(ctx); err != nil {
		if errors.Is(err, cas.ErrMismatch) {
			t.c.corrupt.Add(1)
			t.exists.MarkBad(f.d) // FindMissing asks for it again; its upload is PUT
			return fmt.Errorf("%w: the object for %s in the backend does not match it (corrupt; not served): %v", cas.ErrNotFound, f.d, err)
		}
		return err
	}
	return nil
}

// fillReader is a blob the disk tier lacked when it was opened: reading it
// fills it from the backend.
type fillReader struct {
	t *Store
	d cas.Digest
}

func (r *fillReader) Size() int64 { return r.d.Size }

// Stored returns Uncompressed: the backend keeps blobs plain.
func (r *fillReader) Stored() cas.Encoding { return cas.Uncompressed }

// ReadZstd fills the blob from the backend to the disk tier, then reads it
// compressed from there: compressed reads are the disk tier's business.
func (r *fillReader) ReadZstd(ctx context.Context, off int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	t := r.t
	if err := r.fill(ctx); err != nil {
		return err
	}
	b, err := t.local.Open(ctx, r.d)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.ReadZstd(ctx, off, pool, chunkSize, fn)
}

// fill fills the blob from the backend to the disk tier, unless it is
// there already (filled since Open looked), and counts the lookup.
func (r *fillReader) fill(ctx context.Context) error {
	t := r.t
	if ok, _ := cas.Contains(ctx, t.local, r.d); !ok {
		if err := waitFill(ctx, t.joinFill(ctx, r.d)); err != nil {
			t.countFillLookup(err)
			return err
		}
	}
	t.c.lookups[TierShared].Add(1)
	return nil
}

func (r *fillReader) Close() error { return nil }

// ReadChunks fills the blob from the backend to the disk tier, then hands
// [off, end) to fn from there: a read of a corrupt object sends nothing
// and ends with NOT_FOUND.
func (r *fillReader) ReadChunks(ctx context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	if err := r.fill(ctx); err != nil {
		return err
	}
	return r.t.readDisk(ctx, r.d, off, end, pool, chunkSize, fn)
}

// waitFill waits for f to end and returns its error.
func waitFill(ctx context.Context, f *fill) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// countFillLookup counts a read that missed the disk by how its fill ended.
func (t *Store) countFillLookup(err error) {
	switch {
	case err == nil:
		t.c.lookups[TierShared].Add(1)
	case errors.Is(err, cas.ErrNotFound):
		t.c.lookups[TierMiss].Add(1)
	}
}

// readDisk reads [off, end) of blob d from the disk tier, uncounted (the
// lookup was counted when the blob was opened).
func (t *Store) readDisk(ctx context.Context, d cas.Digest, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	b, err := t.local.Open(ctx, d)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.ReadChunks(ctx, off, end, pool, chunkSize, fn)
}

// WriteRange writes what ReadChunks reads (cas.WriteChunks): the bytes
// come into memory to be filled from the backend anyway.
func (r *fillReader) WriteRange(ctx context.Context, w io.Writer, off, end int64, pool membuf.BufferPool, chunkSize int) (int64, error) {
	return cas.WriteChunks(ctx, r, w, off, end, pool, chunkSize)
}
