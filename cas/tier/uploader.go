package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/membuf/membuf"
	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/tier/chunkstream"
	"github.com/membuf/membuf/cas/tier/uploadmem"
)

// uploader is the bounded background queue that copies committed entries
// to the backend: Config.UploadWorkers workers, at most Config.UploadBytes
// of uploads in flight at once. Its entries are also in the journal until
// the backend has them, so a crash loses none: the next start queues them
// again.
//
// A failed attempt delays that entry, not a worker: the entry waits an
// exponential backoff of its own (from Config.RetryBackoff, doubling per
// failure up to maxRetryBackoff, with jitter so that entries that failed
// together do not retry together) while the workers go on with entries
// that are due. The first success after failures is the backend answering
// again: every entry waiting out a backoff is due at once, so a queue
// built up in an outage drains at the backend's pace, not the backoffs'.
// To find that out, while attempts fail and nothing is due, the entry
// soonest due is tried anyway once every probeEvery. While the last
// UploadWorkers attempts have all failed the backend counts as down: then
// nothing else is tried, not even a new entry, so that an outage costs
// one request a second however many writes go on, and a drain starts
// within a second of its end; and a write-through commit waits only for
// its own entry's attempt, at the front of the queue, at most
// RequestTimeout.
//
// An entry leaves the journal only when the backend has the last version
// committed and no commit of it is under way: a commit writes its journal
// line before it renames, so a line removed while a commit of the same
// entry is in flight could lose that commit's upload at a crash.
type uploader struct {
	t        *Store
	inFlight *semaphore.Weighted

	mu         sync.Mutex
	items      map[Key]*pendingUpload
	committing map[Key]int      // commits under way, between beginCommit and endCommit
	queue      []*pendingUpload // waiting, oldest first; write-through ones go first
	smallQueue int              // how many of the queue are small
	smallBytes int64            // and their bytes
	bytes      int64            // of the items
	closed     bool
	wake       chan struct{} // a token when there is queued work, for the workers
	changed    chan struct{} // closed and replaced whenever an attempt ends
	failing    int           // attempts that failed since the last that succeeded
	lastStart  time.Time     // of the last attempt handed out
	now        func() time.Time
}

// probeEvery is how often, while attempts fail, an entry is tried before
// its backoff is over: see uploader.
const probeEvery = time.Second

// pendingUpload is an entry the backend does not have yet.
type pendingUpload struct {
	key  Key
	data []byte          // an action result's bytes, when known (not after a restart)
	held *uploadmem.Blob // a blob's bytes, when held (held.go); nil while a worker has them

	version  uint64 // counts commits of key; an upload covers the version it read
	attempt  uint64 // the version of the last attempt that ended
	uploaded uint64 // the last version the backend has
	lastErr  error  // why the last attempt failed, if it did
	queued   bool
	running  bool
	urgent   bool      // a write-through commit waits for it: no lingering
	queuedAt time.Time // when it last joined the queue
	// failures counts the attempts that failed in a row; a queued entry
	// is not due before notBefore.
	failures  int
	notBefore time.Time
}

// errLost: the entry is no longer on disk, so it cannot be uploaded.
var errLost = errors.New("no longer on disk")

func newUploader(t *Store) *uploader {
	return &uploader{
		t:          t,
		inFlight:   semaphore.NewWeighted(t.cfg.UploadBytes),
		items:      make(map[Key]*pendingUpload),
		committing: make(map[Key]int),
		wake:       make(chan struct{}, 1),
		changed:    make(chan struct{}),
		now:        time.Now,
	}
}

// size is what an entry counts toward UploadBytes and the queue's bytes.
// The caller holds uploader.mu: a commit may replace an action result's
// data meanwhile.
func (p *pendingUpload) size() int64 { return uploadSize(p.key, p.data) }

// uploadSize is the size of the upload of key whose data (an action
// result's; nil for a blob) is data.
func uploadSize(key Key, data []byte) int64 {
	if key.AC {
		return int64(len(data))
	}
	return key.Size
}

// beginCommit notes that a commit of key is starting; the caller then
// journals key, commits, and calls endCommit whatever happened.
func (u *uploader) beginCommit(key Key) {
	u.mu.Lock()
	u.committing[key]++
	u.mu.Unlock()
}

// endCommit ends a commit of key. If it stored the entry (ok), key is
// queued (with data for an action result, held for a blob held in
// memory), at the front if first (a write-through client waits for it),
// and the version it made is returned for wait. It owns held.
func (u *uploader) endCommit(key Key, ok bool, data []byte, held *uploadmem.Blob, first bool) (*pendingUpload, uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.committing[key]--; u.committing[key] == 0 {
		delete(u.committing, key)
	}
	p := u.items[key]
	if !ok {
		held.Free()
		if p != nil {
			u.settleLocked(p)
		} else if u.committing[key] == 0 {
			u.t.journal.done(key) // the line this commit wrote: nothing was stored
		}
		return nil, 0
	}
	if p == nil {
		p = &pendingUpload{key: key}
		u.items[key] = p
	} else {
		u.bytes -= p.size()
		u.countSmallLocked(p, -1)
	}
	p.version++
	if key.AC {
		p.data = data
	}
	if held != nil {
		// A blob's bytes are those of every version (its name is their
		// hash): the ones held already do as well.
		if p.held == nil {
			p.held = held
		} else {
			held.Free()
		}
	}
	u.bytes += p.size()
	u.countSmallLocked(p, 1)
	if !p.queued && !p.running {
		p.queued, p.urgent, p.queuedAt = true, first, u.now()
		if first {
			u.queue = append([]*pendingUpload{p}, u.queue...)
		} else {
			u.queue = append(u.queue, p)
		}
		u.countSmallLocked(p, 1)
		u.signalQueuedLocked(p)
	}
	return p, p.version
}

// queueReplayed queues key, pending from a previous run.
func (u *uploader) queueReplayed(key Key) {
	u.beginCommit(key)
	u.endCommit(key, true, nil, nil, false)
}

// settleLocked decides what becomes of p when nothing is working on it:
// gone from the queue and the journal if the backend has its last version
// and no commit of it is under way, queued again if it lacks a version.
func (u *uploader) settleLocked(p *pendingUpload) {
	if p.queued || p.running || u.items[p.key] != p {
		return
	}
	switch {
	case p.uploaded >= p.version && u.committing[p.key] == 0:
		delete(u.items, p.key)
		u.bytes -= p.size()
		p.held.Free()
		p.held = nil
		u.t.journal.done(p.key)
	case p.uploaded < p.version:
		p.queued, p.queuedAt = true, u.now()
		u.queue = append(u.queue, p)
		u.countSmallLocked(p, 1)
		u.signalQueuedLocked(p)
	}
}

// countSmallLocked adds d to smallQueue, and d times p's size to
// smallBytes, if p is queued and small.
func (u *uploader) countSmallLocked(p *pendingUpload, d int) {
	if p.queued && p.small() {
		u.smallQueue += d
		u.smallBytes += int64(d) * p.size()
	}
}

// signalQueuedLocked wakes a worker for p, just queued, unless p is a
// small entry lingering behind others for a batch that it does not fill:
// a worker already waits for the oldest one's linger to end, and waking
// one for every small write cost a wait and a timer each (a tenth of an
// edge's CPU under 4 KiB writes, with a scan of the queue, profiled).
func (u *uploader) signalQueuedLocked(p *pendingUpload) {
	if u.failing == 0 && !p.urgent && p.small() && len(u.queue) > 1 && !u.quarterQueuedLocked() {
		return
	}
	u.signalLocked()
}

// signalLocked lets a worker know there is work.
func (u *uploader) signalLocked() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// taken is an entry a worker took from the queue: the version it
// uploads, an action result's data, a blob's bytes held (nil: read it
// from disk), which the worker owns until its attempt ends.
type taken struct {
	p       *pendingUpload
	version uint64
	data    []byte
	held    *uploadmem.Blob
}

// Batches: a worker that takes a small entry takes the other small
// entries that are due with it, at most Config.BatchEntries of them and
// Config.BatchBytes in all, and hands them to the backend in one Put (an
// upstream cache's BatchUpdateBlobs: a request for many; a packed
// bucket's pack). A small entry that is not urgent waits up to
// Config.BatchLinger from when it was queued for others to join it, so
// that a steady stream of small writes goes up in batches rather than one
// by one; a quarter of a batch due (of its entries or of its bytes) is
// enough not to wait for more. By bytes too: the entries of 64 KiB that
// make a quarter of a packed batch's count are four batches' bytes, held
// in memory (held.go) while they wait.
const (
	batchEntryBytes = 256 << 10
	batchEntries    = 64
	batchBytes      = 2 << 20
	batchLinger     = 20 * time.Millisecond
)

// batchFull and batchFullBytes are how many small entries, or their
// bytes, due end a linger.
func (u *uploader) batchFull() int { return max(1, u.t.cfg.BatchEntries/4) }

func (u *uploader) batchFullBytes() int64 { return max(1, u.t.cfg.BatchBytes/4) }

// quarterQueuedLocked reports whether the small entries queued, due or
// not, are a quarter of a batch.
func (u *uploader) quarterQueuedLocked() bool {
	return u.smallQueue >= u.batchFull() || u.smallBytes >= u.batchFullBytes()
}

// small reports whether p may share a batch.
func (p *pendingUpload) small() bool { return p.size() <= batchEntryBytes }

// next takes the oldest queued entry that is due, and the small ones that
// may go with it (see batchLinger), waiting for one; nil once closed.
func (u *uploader) next(ctx context.Context) []taken {
	for {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil
		}
		now := u.now()
		take := -1
		var soonest time.Time // of the entries not yet due
		for i, q := range u.queue {
			if !q.notBefore.After(now) {
				take = i
				break
			}
			if soonest.IsZero() || q.notBefore.Before(soonest) {
				soonest, take = q.notBefore, i
			}
		}
		probe := u.failing > 0 && !now.Before(u.lastStart.Add(probeEvery))
		// While the backend counts as down (its last UploadWorkers
		// attempts all failed) an entry that is due, a new one above all,
		// waits for the next probe like the others: it would only fail
		// too, and under a write load every new entry cost a request
		// (an edge writing 4 KiB blobs spent 5x its CPU on them).
		down := u.failing >= u.t.cfg.UploadWorkers
		if take >= 0 && (!u.queue[take].notBefore.After(now) && !down || probe) {
			if head := u.queue[take]; head.small() && !head.urgent && u.failing == 0 {
				// smallQueue bounds the scan's count: under a write load
				// the queue is long and the scan ran at every wake.
				if lingerEnd := head.queuedAt.Add(u.t.cfg.BatchLinger); now.Before(lingerEnd) && (!u.quarterQueuedLocked() || !u.quarterDueLocked(now)) {
					soonest = lingerEnd
					goto wait
				}
			}
			batch := []taken{u.takeLocked(take, now)}
			if first := batch[0].p; first.small() && u.failing == 0 {
				bytes := first.size()
				for i := 0; i < len(u.queue) && len(batch) < u.t.cfg.BatchEntries; {
					q := u.queue[i]
					if q.notBefore.After(now) || !q.small() || bytes+q.size() > u.t.cfg.BatchBytes {
						i++
						continue
					}
					bytes += q.size()
					batch = append(batch, u.takeLocked(i, now))
				}
			}
			if len(u.queue) > 0 {
				u.signalLocked() // for the next worker
			}
			u.mu.Unlock()
			return batch
		}
		if p := u.lastStart.Add(probeEvery); u.failing > 0 && (down && take >= 0 || !soonest.IsZero()) && (soonest.IsZero() || p.Before(soonest)) {
			soonest = p
		}
	wait:
		u.mu.Unlock()
		var due <-chan time.Time
		var timer *time.Timer
		if !soonest.IsZero() {
			timer = time.NewTimer(soonest.Sub(now))
			due = timer.C
		}
		// Stopped here, not deferred: while the backend is down every new
		// entry wakes the workers, and a deferred Stop kept each wait's
		// timer until the next probe.
		select {
		case <-u.wake:
		case <-due:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// quarterDueLocked reports whether the small entries queued and due are
// a quarter of a batch.
func (u *uploader) quarterDueLocked(now time.Time) bool {
	n, bytes := 0, int64(0)
	for _, q := range u.queue {
		if !q.notBefore.After(now) && q.small() {
			n, bytes = n+1, bytes+q.size()
			if n >= u.batchFull() || bytes >= u.batchFullBytes() {
				return true
			}
		}
	}
	return false
}

// takeLocked takes the queue's entry i for a worker.
func (u *uploader) takeLocked(i int, now time.Time) taken {
	q := u.queue[i]
	if i == 0 {
		// The usual case, and a queue may hold a whole outage's entries:
		// reslice rather than move them all (the next append that grows
		// it leaves the taken ones behind).
		u.queue[0] = nil
		u.queue = u.queue[1:]
	} else {
		u.queue = slices.Delete(u.queue, i, i+1)
	}
	u.countSmallLocked(q, -1)
	q.queued, q.running = false, true
	u.lastStart = now
	e := taken{p: q, version: q.version, data: q.data, held: q.held}
	q.held = nil
	return e
}

// retryDelay is the backoff after an entry's failures-th failure in a
// row: RetryBackoff doubled per failure up to maxRetryBackoff, then a
// random half of it taken off (jitter).
func (u *uploader) retryDelay(failures int) time.Duration {
	d := u.t.cfg.RetryBackoff
	for i := 1; i < failures && d < maxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, maxRetryBackoff)
	return d - rand.N(d/2+1)
}

// backendDown reports whether the last UploadWorkers attempts all failed:
// a write-through commit then waits at most RequestTimeout.
func (u *uploader) backendDown() bool {
	_, down := u.failures()
	return down
}

// failures returns the attempts that failed since the last success, and
// whether that makes the backend down.
func (u *uploader) failures() (int64, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return int64(u.failing), u.failing >= u.t.cfg.UploadWorkers
}

// finish ends an attempt at p's version: err nil (the backend has it),
// errLost (it is gone from disk: nothing more to do), or a failure to
// retry. It counts the attempt, and logs a change of state (rare, so
// under u.mu), before p settles: Drain and a writer waiting for p return
// once it has settled, and TierStats and the log must already show it then
// (a drained store read one upload short, and the recovery line missing,
// in CI). It returns p's failures in a row if this attempt failed without
// a line: the caller's to log at debug, outside the lock.
func (u *uploader) finish(ctx context.Context, e taken, err error) (quietFailures int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	p, version := e.p, e.version
	if e.held != nil && p.held == nil && err != nil && !errors.Is(err, errLost) && !errors.Is(err, ErrNotKept) {
		p.held = e.held // for the next attempt
	} else {
		e.held.Free() // the pack (or object) it went into is sent
	}
	p.running = false
	p.attempt, p.lastErr = version, err
	switch lost := errors.Is(err, errLost); {
	case err == nil || lost || errors.Is(err, ErrNotKept):
		p.uploaded = max(p.uploaded, version)
		p.failures, p.notBefore = 0, time.Time{}
		if err != nil && !lost {
			break // local only: the backend keeps none of its function
		}
		if lost {
			u.t.c.uploadsLost.Add(1)
			u.t.log.Error("tier: a pending upload is no longer on disk; the backend will not get it", "entry", p.key.String())
			break
		}
		u.t.c.uploaded.Add(1)
		if u.failing > 0 {
			// The backend answers again: whatever waits out a backoff
			// is due now.
			u.t.log.Info("tier: uploads to the shared tier succeed again", "tier", u.t.cfg.Name, "failed_attempts", u.failing)
			u.failing = 0
			for _, q := range u.queue {
				q.failures, q.notBefore = 0, time.Time{}
			}
			u.signalLocked()
		}
	default:
		u.t.c.uploadRetries.Add(1)
		u.failing++
		p.failures++
		p.notBefore = u.now().Add(u.retryDelay(p.failures))
		if u.failing == 1 {
			u.t.log.Log(ctx, slog.LevelWarn, failedLine, "entry", p.key.String(), "failures", p.failures, "err", err)
		} else {
			quietFailures = p.failures
		}
	}
	u.settleLocked(p)
	close(u.changed)
	u.changed = make(chan struct{})
	return quietFailures
}

// wait waits until the backend has version of p, or an attempt at it
// failed (that error), or ctx is done.
func (u *uploader) wait(ctx context.Context, p *pendingUpload, version uint64) error {
	for {
		u.mu.Lock()
		uploaded, attempt, lastErr, changed := p.uploaded, p.attempt, p.lastErr, u.changed
		u.mu.Unlock()
		switch {
		case uploaded >= version:
			return nil
		case attempt >= version && lastErr != nil:
			return lastErr
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: stored locally; waiting for the backend: %v", cas.ErrUnavailable, ctx.Err())
		}
	}
}

// drain waits until nothing is pending, or ctx is done.
func (u *uploader) drain(ctx context.Context) error {
	for {
		u.mu.Lock()
		n, changed := len(u.items), u.changed
		u.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d uploads still pending (kept in the journal for the next start): %w", n, ctx.Err())
		}
	}
}

// pending returns whether key is waiting for the backend.
func (u *uploader) pending(key Key) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.items[key] != nil
}

// length returns the pending items and their bytes.
func (u *uploader) length() (int64, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return int64(len(u.items)), u.bytes
}

// close stops handing out work.
func (u *uploader) close() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
}

// releaseHeld frees the blobs held for uploads that did not run, once
// the workers have stopped: the journal has them for the next start.
func (u *uploader) releaseHeld() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, p := range u.items {
		p.held.Free()
		p.held = nil
	}
}

// work is one upload worker, until ctx is done or the uploader closes.
// It never waits out a failure: the entry that failed does (finish).
func (u *uploader) work(ctx context.Context) {
	defer u.t.wg.Done()
	for {
		batch := u.next(ctx)
		if batch == nil {
			return
		}
		for i, err := range u.upload(ctx, batch) {
			u.ended(ctx, batch[i], err)
		}
	}
}

// ended ends the attempt at one entry of a batch. An outage fails every
// entry, new ones included, so what is logged is the change of state: the
// first failure after a success (with its error) and the first success
// after failures (with their count); each entry's own failures are at
// debug. A line per entry flooded the log with thousands a second while
// writes went on during an outage.
func (u *uploader) ended(ctx context.Context, e taken, err error) {
	if failures := u.finish(ctx, e, err); failures > 0 {
		u.t.log.Log(ctx, slog.LevelDebug, failedLine, "entry", e.p.key.String(), "failures", failures, "err", err)
	}
}

// failedLine says an upload failed: at warn for the first failure after a
// success, at debug for the rest.
const failedLine = "tier: upload failed; will retry (further failures until one succeeds are logged at debug)"

// maxRetryBackoff caps the wait between failed upload attempts.
const maxRetryBackoff = time.Minute

// upload copies a batch of entries to the backend in one Put and
// returns an error for each: a blob from disk, streamed; an action result
// from its data, or from disk when that is nil.
func (u *uploader) upload(ctx context.Context, batch []taken) []error {
	t := u.t
	errs := make([]error, len(batch))
	// The sizes of the versions taken, not p.size(): a commit may replace
	// an action result's data while this uploads.
	var size int64
	for _, e := range batch {
		size += uploadSize(e.p.key, e.data)
	}
	w := min(max(size, 1), t.cfg.UploadBytes)
	if err := u.inFlight.Acquire(ctx, w); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer u.inFlight.Release(w)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(t.cfg.RequestTimeout, func() {
		cancel(fmt.Errorf("no progress for %v", t.cfg.RequestTimeout))
	})
	defer stall.Stop()
	progress := func() { stall.Reset(t.cfg.RequestTimeout) }

	uploads := make([]Upload, 0, len(batch))
	sent := make([]int, 0, len(batch)) // the index in batch of each of uploads
	for i, e := range batch {
		up, closeBody, err := u.uploadOf(ctx, e, progress)
		if err != nil || up.Body == nil {
			errs[i] = err // nil: the backend has it already
			continue
		}
		defer closeBody()
		uploads = append(uploads, up)
		sent = append(sent, i)
	}
	if len(uploads) == 0 {
		return errs
	}
	for j, err := range t.backend.Put(ctx, uploads) {
		i := sent[j]
		errs[i] = err
		if err == nil && !batch[i].p.key.AC {
			t.exists.Uploaded(batch[i].p.key.Digest())
		}
	}
	return errs
}

// uploadOf makes the Upload of one entry, and what closes its body; an
// Upload without a Body means the backend has the entry already.
func (u *uploader) uploadOf(ctx context.Context, e taken, progress func()) (Upload, func(), error) {
	t := u.t
	k := e.p.key
	if k.AC {
		data := e.data
		if data == nil {
			var err error
			data, err = t.local.GetActionResult(ctx, k.Digest(), cas.ServerCheck) // the upload's own read
			if errors.Is(err, cas.ErrNotFound) {
				return Upload{}, nil, errLost
			}
			if err != nil {
				return Upload{}, nil, err
			}
		}
		sum := sha256.Sum256(data)
		return Upload{Key: k, Body: bytes.NewReader(data), Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}, func() {}, nil
	}
	if exists, ok := t.exists.Get(k.Digest()); ok && exists {
		return Upload{}, nil, nil // the shared tier said it has it; a put would change nothing
	}
	if e.held != nil {
		data := e.held.Bytes() // checked against k by the disk's commit
		sum := k.Hash
		if k.Function != cas.SHA256 {
			s := sha256.Sum256(data)
			sum = hex.EncodeToString(s[:])
		}
		return Upload{Key: k, Body: bytes.NewReader(data), Size: k.Size, SHA256: sum}, func() {}, nil
	}
	t.c.uploadsReadBack.Add(1)
	b, err := t.local.Open(ctx, k.Digest())
	if errors.Is(err, cas.ErrNotFound) {
		return Upload{}, nil, errLost
	}
	if err != nil {
		return Upload{}, nil, err
	}
	sum := k.Hash
	if k.Function != cas.SHA256 {
		// The backend's checksum is a SHA-256 (S3 checks it as the bytes
		// arrive), and this blob's name is not one: one more read of the
		// blob makes it.
		if sum, err = sha256Of(ctx, b, t.cfg.Pool, t.cfg.ChunkSize); err != nil {
			b.Close()
			return Upload{}, nil, err
		}
	}
	body := chunkstream.New(ctx, b, t.cfg.Pool, t.cfg.ChunkSize, progress)
	return Upload{Key: k, Body: body, Size: k.Size, SHA256: sum}, func() {
		body.Close()
		b.Close()
	}, nil
}

// sha256Of reads blob b whole and returns its SHA-256 in hex.
func sha256Of(ctx context.Context, b cas.BlobReader, pool membuf.BufferPool, chunkSize int) (string, error) {
	h := sha256.New()
	err := b.ReadChunks(ctx, 0, b.Size(), pool, chunkSize, func(buf membuf.Buffer) error {
		h.Write(buf.Bytes())
		buf.Free()
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}
