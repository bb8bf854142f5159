package gocacheprog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Cache.
type Options struct {
	// Dir is the local directory (OpenDir).
	Dir string
	// MaxSize bounds Dir in bytes, trimmed at Close (Dir.Trim) at most
	// every five minutes; 0 means no bound.
	MaxSize int64
	// Remote is the shared cache; nil: the local directory alone.
	Remote Remote
	// ReadOnly asks the remote and never writes to it.
	ReadOnly bool
	// GetTimeout bounds a remote get until its first byte arrives and
	// between bytes after; 0 means DefaultGetTimeout. A slow remote costs
	// a build this once: after it, the remote is left alone.
	GetTimeout time.Duration
	// UploadQueue bounds the puts waiting for upload; a put beyond it is
	// not uploaded (counted, logged at Close). 0 means DefaultUploadQueue.
	UploadQueue int
	// Uploaders is how many uploads run at once; 0 means 4.
	Uploaders int
	// UploadWait bounds how long Close waits for the queued uploads; 0
	// means DefaultUploadWait.
	UploadWait time.Duration
	// Logger receives what goes wrong (go shows the program's stderr);
	// nil discards it.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultGetTimeout  = 2 * time.Second
	DefaultUploadQueue = 1024
	DefaultUploadWait  = 10 * time.Second
)

// trimEvery is how often, at most, a Close trims the directory: between
// trims it may grow past MaxSize by what go commands write meanwhile.
const trimEvery = 5 * time.Minute

// Cache answers go's gets and puts from a Dir and a Remote.
type Cache struct {
	opts Options
	dir  *Dir
	log  *slog.Logger

	// remoteOff is set by the remote's first failure: from then on this
	// invocation neither asks nor uploads, so a remote that is down or
	// slow costs go's build one wait, not one per action.
	remoteOff atomic.Bool
	failOnce  sync.Once

	uploads   chan upload
	uploading sync.WaitGroup
	stopCtx   context.Context
	stop      context.CancelFunc

	// fetches are the remote gets running; fetching ahead runs in ahead,
	// at most maxAhead at once (aheadSlots), until aheadStop.
	fetches    fetches
	ahead      sync.WaitGroup
	aheadSlots chan struct{}
	aheadCtx   context.Context
	aheadStop  context.CancelFunc

	stats Stats
}

// Stats count what a Cache did.
type Stats struct {
	Gets, LocalHits, RemoteHits, Misses   atomic.Int64
	Puts, Uploaded, UploadsDropped        atomic.Int64
	RemoteErrors, Mismatches, UploadFails atomic.Int64
	// AheadTries counts the fetches ahead started (stdoutKey), of which
	// FetchedAhead got an output before go asked for it.
	AheadTries, FetchedAhead atomic.Int64
}

type upload struct {
	actionID, outputID ID
	size               int64
	path               string
}

// Open opens the cache's directory and starts its uploaders.
func Open(opts Options) (*Cache, error) {
	if opts.GetTimeout <= 0 {
		opts.GetTimeout = DefaultGetTimeout
	}
	if opts.UploadQueue <= 0 {
		opts.UploadQueue = DefaultUploadQueue
	}
	if opts.Uploaders <= 0 {
		opts.Uploaders = 4
	}
	if opts.UploadWait <= 0 {
		opts.UploadWait = DefaultUploadWait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	dir, err := OpenDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cache{opts: opts, dir: dir, log: opts.Logger, aheadSlots: make(chan struct{}, maxAhead)}
	c.stopCtx, c.stop = context.WithCancel(context.Background())
	c.aheadCtx, c.aheadStop = context.WithCancel(context.Background())
	if opts.Remote != nil && !opts.ReadOnly {
		c.uploads = make(chan upload, opts.UploadQueue)
		for range opts.Uploaders {
			c.uploading.Go(c.uploader)
		}
	}
	return c, nil
}

// Stats returns the cache's counters.
func (c *Cache) Stats() *Stats { return &c.stats }

// remoteFailed turns the remote off for this invocation, logging why the
// first time.
func (c *Cache) remoteFailed(what string, err error) {
	c.stats.RemoteErrors.Add(1)
	c.remoteOff.Store(true)
	c.failOnce.Do(func() {
		c.log.Warn("gocache: the remote cache failed; building without it for the rest of this go command", "op", what, "err", err)
	})
}

// Get returns the entry for actionID: from the directory, or else from
// the remote, checked and kept in the directory. A miss is false, never
// an error: go builds what it does not get.
func (c *Cache) Get(ctx context.Context, actionID ID) (Entry, bool) {
	var e Entry
	var ok bool
	c.get(ctx, actionID, func(ge Entry, gok bool) { e, ok = ge, gok })
	return e, ok
}

// get is Get answering go through answer as soon as it can: for a remote
// hit, once the output's file is in place, before the entry naming it is
// written (which only later go commands need). It returns when that is
// written too.
func (c *Cache) get(ctx context.Context, actionID ID, answer func(Entry, bool)) {
	c.stats.Gets.Add(1)
	if e, ok := c.dir.Get(actionID); ok {
		c.stats.LocalHits.Add(1)
		answer(e, true)
		return
	}
	if c.opts.Remote == nil || c.remoteOff.Load() {
		c.stats.Misses.Add(1)
		answer(Entry{}, false)
		return
	}
	f, running := c.fetches.start(actionID)
	if running {
		// Fetched ahead (or asked by two go commands' worth of gets at
		// once): the answer is that fetch's.
		select {
		case <-f.done:
			c.countGet(f.ok)
			answer(f.e, f.ok)
		case <-ctx.Done():
			c.countGet(false)
			answer(Entry{}, false)
		}
		return
	}
	c.fetch(ctx, actionID, f, answer, true)
}

func (c *Cache) countGet(hit bool) {
	if hit {
		c.stats.RemoteHits.Add(1)
	} else {
		c.stats.Misses.Add(1)
	}
}

// fetch gets actionID from the remote into the directory for f (and go,
// through answer, if go asked). After a hit of a get go asked for a
// compiled package, it fetches ahead the compiler output go asks for next
// (stdoutKey): its round trip runs while go reads the answer and this
// writes the entry.
func (c *Cache) fetch(ctx context.Context, actionID ID, f *fetch, answer func(Entry, bool), asked bool) {
	e, archive, err := c.getRemote(ctx, actionID)
	var local localError
	switch {
	case err == nil:
	case errors.Is(err, ErrMiss):
	case errors.As(err, &local):
		// The directory failed (a full disk), not the remote.
		c.log.Warn("gocache: the local directory failed", "dir", c.opts.Dir, "err", local.err)
	case errors.Is(err, ErrMismatch):
		c.stats.Mismatches.Add(1)
		c.remoteFailed("get "+actionID.String(), err)
	case !asked && ctx.Err() != nil:
		// A fetch ahead that Close ended: nothing failed.
	default:
		c.remoteFailed("get "+actionID.String(), err)
	}
	ok := err == nil
	f.e, f.ok = e, ok
	close(f.done)
	if ok && asked && archive {
		c.fetchAhead(stdoutKey(actionID))
	}
	if asked {
		c.countGet(ok)
		answer(e, ok)
	} else if ok {
		c.stats.FetchedAhead.Add(1)
	}
	if ok {
		if err := c.dir.putEntry(actionID, e); err != nil {
			// go has its output; only a later go command misses it.
			c.log.Warn("gocache: the local directory failed", "dir", c.opts.Dir, "err", err)
		}
	}
	c.fetches.finish(actionID, !asked && !ok)
}

// fetchAhead fetches actionID in the background, unless it is being
// fetched, or as many fetches ahead as maxAhead are running.
func (c *Cache) fetchAhead(actionID ID) {
	if c.remoteOff.Load() {
		return
	}
	select {
	case c.aheadSlots <- struct{}{}:
	default:
		return
	}
	f, running := c.fetches.start(actionID)
	if running || c.aheadCtx.Err() != nil {
		<-c.aheadSlots
		return
	}
	c.stats.AheadTries.Add(1)
	c.ahead.Go(func() {
		defer func() { <-c.aheadSlots }()
		if e, ok := c.dir.Get(actionID); ok {
			f.e, f.ok = e, true
			close(f.done)
			c.fetches.finish(actionID, false)
			return
		}
		c.fetch(c.aheadCtx, actionID, f, nil, false)
	})
}

// archiveMagic starts a compiled package's output (an ar archive); the
// go command keeps other outputs in its cache (its module index, test
// results), which have no compiler output to fetch ahead.
const archiveMagic = "!<arch>\n"

// getRemote fetches actionID's output into the directory, giving the
// remote GetTimeout for each step (the answer, then each read), and says
// whether it is a compiled package's (archiveMagic). It writes the
// output's file, not the entry naming it.
func (c *Cache) getRemote(ctx context.Context, actionID ID) (_ Entry, archive bool, _ error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stall := time.AfterFunc(c.opts.GetTimeout, cancel)
	defer stall.Stop()
	outputID, size, body, err := c.opts.Remote.Get(ctx, actionID)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ErrMiss) {
			err = fmt.Errorf("no answer within %v: %w", c.opts.GetTimeout, err)
		}
		return Entry{}, false, err
	}
	defer body.Close()
	r := &stallReader{r: body, stall: stall, d: c.opts.GetTimeout}
	var readErr error
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	head := &headWriter{}
	e, err := c.dir.putOutput(outputID, size, func(w io.Writer) (int64, error) {
		head.w = w
		// One byte past size: a longer body is caught, not cut to fit.
		n, err := io.CopyBuffer(head, io.LimitReader(r, size+1), *buf)
		readErr = r.err
		return n, err
	})
	if err != nil && readErr == nil && !errors.Is(err, ErrMismatch) {
		return Entry{}, false, localError{err}
	}
	return e, head.isArchive(), err
}

// headWriter writes to w, keeping the first bytes written, as many as
// archiveMagic has.
type headWriter struct {
	w    io.Writer
	head [len(archiveMagic)]byte
	n    int
}

func (h *headWriter) Write(p []byte) (int, error) {
	h.n += copy(h.head[h.n:], p)
	return h.w.Write(p)
}

// isArchive reports whether what was written starts with archiveMagic.
func (h *headWriter) isArchive() bool {
	return h.n == len(archiveMagic) && string(h.head[:]) == archiveMagic
}

// copyBuffers lend getRemote the buffer it copies an output through,
// which io.Copy would allocate for each get (the writer hashes as it
// writes, so neither side copies by itself).
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// localError is the directory's failure during a remote get.
type localError struct{ err error }

func (e localError) Error() string { return e.err.Error() }

// stallReader gives each read d more before the stall timer cancels the
// get.
type stallReader struct {
	r     io.Reader
	stall *time.Timer
	d     time.Duration
	err   error // the remote's, other than io.EOF
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.stall.Reset(s.d)
	}
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// Put keeps the output in the directory (checked against outputID) and
// queues its upload; it returns once the output is local.
func (c *Cache) Put(actionID, outputID ID, size int64, write func(w io.Writer) (int64, error)) (Entry, error) {
	c.stats.Puts.Add(1)
	e, err := c.dir.Put(actionID, outputID, size, write)
	if err != nil {
		return Entry{}, err
	}
	if c.uploads != nil && !c.remoteOff.Load() {
		select {
		case c.uploads <- upload{actionID, outputID, size, e.DiskPath}:
		default:
			c.stats.UploadsDropped.Add(1) // the queue is full: go is not kept waiting
		}
	}
	return e, nil
}

// uploader uploads queued puts until the queue closes or Close gives up.
func (c *Cache) uploader() {
	for u := range c.uploads {
		if c.remoteOff.Load() || c.stopCtx.Err() != nil {
			c.stats.UploadsDropped.Add(1)
			continue
		}
		if err := c.upload(u); err != nil {
			c.stats.UploadFails.Add(1)
			if c.stopCtx.Err() == nil {
				c.remoteFailed("put "+u.actionID.String(), err)
			}
			continue
		}
		c.stats.Uploaded.Add(1)
	}
}

func (c *Cache) upload(u upload) error {
	f, err := os.Open(u.path)
	if err != nil {
		return fmt.Errorf("%w (the local file was trimmed)", err)
	}
	defer f.Close()
	return c.opts.Remote.Put(c.stopCtx, u.actionID, u.outputID, u.size, f)
}

// Close waits for the queued uploads, at most UploadWait, then trims the
// directory to MaxSize and closes the remote.
func (c *Cache) Close() error {
	// What is fetched ahead now, go will not ask for.
	c.aheadStop()
	c.ahead.Wait()
	if c.uploads != nil {
		close(c.uploads)
		done := make(chan struct{})
		go func() { c.uploading.Wait(); close(done) }()
		timer := time.NewTimer(c.opts.UploadWait)
		select {
		case <-done:
			timer.Stop()
		case <-timer.C:
			c.stop() // the uploads in flight end, the rest are dropped
			<-done
			c.log.Warn("gocache: close gave up waiting for uploads", "wait", c.opts.UploadWait)
		}
	}
	c.stop()
	if n := c.stats.UploadsDropped.Load(); n > 0 {
		c.log.Warn("gocache: outputs not uploaded", "count", n, "uploaded", c.stats.Uploaded.Load())
	}
	var errs []error
	if c.opts.MaxSize > 0 && c.dir.trimDue(trimEvery) {
		if _, err := c.dir.Trim(c.opts.MaxSize); err != nil {
			errs = append(errs, err)
		}
	}
	if c.opts.Remote != nil {
		errs = append(errs, c.opts.Remote.Close())
	}
	errs = append(errs, c.dir.Close())
	return errors.Join(errs...)
}
