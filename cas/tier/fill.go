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
// one fill (Store.fills): the first, the leader, also receives the chunks
// as they arrive, by reference; the others wait for the commit and read
// from disk.
type fill struct {
	d         cas.Digest
	pool      membuf.BufferPool
	chunkSize int
	// origin is the context of the read that started the fill, without
	// its cancellation: its values (a trace's span) go with the fill's
	// requests to the backend; its end does not stop the fill.
	origin context.Context

	// The leader's range and stream; chunks is nil when there is no leader.
	// Set before the fill starts, never changed.
	off, end int64
	chunks   chan fillChunk // closed by the fill when it sends no more
	gone     chan struct{}  // closed by the leader when it stops reading

	// Only the fill's goroutine uses detached: it stopped sending (and
	// closed chunks) because the leader was too slow.
	detached bool

	done chan struct{} // closed when the fill has ended
	err  error         // why it failed; set before done closes
}

// fillChunk is part of the blob at off, holding one reference.
type fillChunk struct {
	off int64
	buf membuf.Buffer
}

// leaderBuffer is how many chunks a fill queues for a leader that is slower
// than the backend before it waits for it; leaderPatience, how long it then
// waits before it stops sending, so that one slow client does not stall
// the fill (the leader then reads the rest from disk once it is there).
const (
	leaderBuffer   = 16
	leaderPatience = 2 * time.Second
)

// joinFill returns the fill of d, starting one if none is running. leader
// says whether the caller started it, and so receives its chunks of
// [off, end) on f.chunks; stream says whether the caller wants that
// (ReadAll does not).
func (t *Store) joinFill(ctx context.Context, d cas.Digest, stream bool, off, end int64, pool membuf.BufferPool, chunkSize int) (f *fill, leader bool) {
	t.fillMu.Lock()
	defer t.fillMu.Unlock()
	if f := t.fills[d]; f != nil {
		return f, false
	}
	f = &fill{d: d, pool: pool, chunkSize: chunkSize, origin: context.WithoutCancel(ctx), done: make(chan struct{})}
	if stream {
		f.off, f.end = off, end
		f.chunks = make(chan fillChunk, leaderBuffer)
		f.gone = make(chan struct{})
	}
	t.fills[d] = f
	t.wg.Add(1)
	go t.runFill(f)
	return f, true
}

func (t *Store) runFill(f *fill) {
	defer t.wg.Done()
	err := t.fillOnce(f)
	if f.chunks != nil && !f.detached {
		close(f.chunks)
	}
	if f.chunks != nil {
		select {
		case <-f.gone:
			drainChunks(f.chunks)
		default: // the leader drains what is left
		}
	}
	t.fillMu.Lock()
	delete(t.fills, f.d)
	t.fillMu.Unlock()
	if err != nil {
		t.c.fillsFailed.Add(1)
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
		if _, err := w.Write(chunk.Bytes()); err != nil {
			chunk.Free()
			return err
		}
		if !f.send(off, chunk, stall, t.cfg.RequestTimeout) {
			chunk.Free()
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

// send gives the leader the part of chunk (at off) in its range, and
// reports whether it took chunk's reference. It waits for a slow leader
// at most leaderPatience, with the stall watchdog paused, then stops
// sending for good (detached): the leader finishes from disk.
func (f *fill) send(off int64, chunk membuf.Buffer, stall *time.Timer, stallTimeout time.Duration) bool {
	if f.chunks == nil || f.detached {
		return false
	}
	lo, hi := max(off, f.off), min(off+int64(chunk.Len()), f.end)
	if lo >= hi {
		return false
	}
	c := fillChunk{off: lo, buf: chunk}
	if lo != off || hi != off+int64(chunk.Len()) {
		c.buf = chunk.Slice(int(lo-off), int(hi-off))
		chunk.Free()
	}
	select {
	case f.chunks <- c:
		return true
	case <-f.gone:
		c.buf.Free()
		return true
	default:
	}
	stall.Stop()
	defer stall.Reset(stallTimeout)
	wait := time.NewTimer(leaderPatience)
	defer wait.Stop()
	select {
	case f.chunks <- c:
	case <-f.gone:
		c.buf.Free()
	case <-wait.C:
		c.buf.Free()
		f.detached = true
		close(f.chunks)
	}
	return true
}

// drainChunks frees whatever is queued on ch, without blocking.
func drainChunks(ch chan fillChunk) {
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				return
			}
			c.buf.Free()
		default:
			return
		}
	}
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
	if ok, _ := cas.Contains(ctx, t.local, r.d); !ok {
		f, _ := t.joinFill(ctx, r.d, false, 0, 0, t.cfg.Pool, t.cfg.ChunkSize)
		if err := waitFill(ctx, f); err != nil {
			t.countFillLookup(err)
			return err
		}
	}
	t.c.lookups[TierShared].Add(1)
	b, err := t.local.Open(ctx, r.d)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.ReadZstd(ctx, off, pool, chunkSize, fn)
}

func (r *fillReader) Close() error { return nil }

// ReadChunks fills the blob from the backend and hands [off, end) to fn. As
// the fill's leader it streams the chunks as they arrive but holds the
// last one back until the whole object has been verified and committed, so
// a read of a corrupt object never completes: it ends with NOT_FOUND. A
// reader that joins a running fill waits for it and reads from disk.
func (r *fillReader) ReadChunks(ctx context.Context, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	t := r.t
	if ok, _ := cas.Contains(ctx, t.local, r.d); ok {
		// Filled since Open looked.
		t.c.lookups[TierShared].Add(1)
		return t.readDisk(ctx, r.d, off, end, pool, chunkSize, fn)
	}
	f, leader := t.joinFill(ctx, r.d, true, off, end, pool, chunkSize)
	if !leader {
		if err := waitFill(ctx, f); err != nil {
			t.countFillLookup(err)
			return err
		}
		t.c.lookups[TierShared].Add(1)
		return t.readDisk(ctx, r.d, off, end, pool, chunkSize, fn)
	}
	err := r.lead(ctx, f, off, end, pool, chunkSize, fn)
	t.countFillLookup(err)
	return err
}

// lead receives the leader's chunks; see ReadChunks.
func (r *fillReader) lead(ctx context.Context, f *fill, off, end int64, pool membuf.BufferPool, chunkSize int, fn func(membuf.Buffer) error) error {
	defer func() {
		close(f.gone)
		drainChunks(f.chunks)
	}()
	var held membuf.Buffer // the last chunk received, not yet passed on
	next := off            // where the bytes not yet received start
	defer func() {
		if !held.IsZero() {
			held.Free()
		}
	}()
	for {
		var c fillChunk
		var ok bool
		select {
		case c, ok = <-f.chunks:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			break
		}
		if !held.IsZero() {
			h := held
			held = membuf.Buffer{}
			if err := fn(h); err != nil {
				c.buf.Free()
				return err
			}
		}
		held, next = c.buf, c.off+int64(c.buf.Len())
	}
	if err := waitFill(ctx, f); err != nil {
		return err
	}
	if !held.IsZero() {
		h := held
		held = membuf.Buffer{}
		if err := fn(h); err != nil {
			return err
		}
	}
	if next < end {
		// Detached for being slow: the rest is on disk now.
		return r.t.readDisk(ctx, r.d, next, end, pool, chunkSize, fn)
	}
	return nil
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
