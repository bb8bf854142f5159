package layout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/membuf/membuf/cas"
	"github.com/membuf/membuf/cas/backend/packed"
	"github.com/membuf/membuf/cas/tier"
)

// Config configures a Backend.
type Config struct {
	// Objects and Bucket are the object store's per-object layout and
	// its named objects (the same bucket).
	Objects tier.Backend
	Bucket  packed.Bucket
	// Want is the layout the configuration forces; "" takes the
	// bucket's (Decide).
	Want Kind
	// Packed configures the packs, if the bucket is in their layout;
	// Open sets its Objects and Bucket.
	Packed packed.Config
	// RequestTimeout bounds each attempt to read the layout; 0 means
	// 30s.
	RequestTimeout time.Duration
	// RetryEvery is how long after a failed attempt the next may start;
	// 0 means 1s.
	RetryEvery time.Duration
	// Logger receives the decision; nil discards it.
	Logger *slog.Logger
}

// Backend is a tier.Backend over the layout a bucket is in: the packs
// (a packed.Backend) or the per-object layout (Config.Objects), chosen by
// Decide when the bucket first answers. Until then every call fails as
// a backend that is down does, and the next call after RetryEvery asks
// again; a layout that contradicts the configuration fails every call,
// and Probe says it is misconfigured (the server does not start).
type Backend struct {
	cfg    Config
	log    *slog.Logger
	chosen atomic.Pointer[choice]

	mu       sync.Mutex            // one decision at a time
	deciding atomic.Bool           // a decision in the background is under way (kick)
	retryAt  atomic.Int64          // no attempt before, in Unix nanoseconds
	lastErr  atomic.Pointer[error] // the last attempt's
	closed   bool                  // mu

	// sinkMu guards sink, and the packs' read-ahead sink set from it: not
	// mu, which a decision holds while the bucket answers.
	sinkMu sync.Mutex
	sink   packed.ReadAheadSink

	ctx  context.Context // done at Close
	stop context.CancelFunc
}

// choice is a Backend's decision: a backend, or why there is none.
type choice struct {
	kind    Kind
	backend tier.Backend
	packs   *packed.Backend // with Packs
	err     error           // misconfigured: every call fails with it
}

var (
	_ tier.Backend = (*Backend)(nil)
	_ tier.Toucher = (*Backend)(nil)
)

// Open returns a Backend over cfg's bucket and asks for its layout,
// waiting at most wait for the answer (Kind says whether it came).
func Open(cfg Config, wait time.Duration) (*Backend, error) {
	if cfg.Objects == nil || cfg.Bucket == nil {
		return nil, errors.New("layout: Config needs Objects and Bucket")
	}
	if cfg.Want != "" && cfg.Want != Packs && cfg.Want != Objects {
		return nil, fmt.Errorf("layout: Want %q: want %q, %q or none", cfg.Want, Packs, Objects)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.RetryEvery <= 0 {
		cfg.RetryEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Packed.Objects, cfg.Packed.Bucket = cfg.Objects, cfg.Bucket
	b := &Backend{cfg: cfg, log: cfg.Logger}
	b.ctx, b.stop = context.WithCancel(context.Background())
	decided := b.kick()
	select {
	case <-decided:
	case <-time.After(wait):
	}
	return b, nil
}

// kick starts a decision in the background, unless one is under way or
// the last failed less than RetryEvery ago; the channel is closed when it
// ends (nil if none started).
func (b *Backend) kick() <-chan struct{} {
	if time.Now().UnixNano() < b.retryAt.Load() || !b.deciding.CompareAndSwap(false, true) {
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer b.deciding.Store(false)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.decideLocked()
	}()
	return done
}

// Kind is the layout chosen; "" until the bucket has answered, or if its
// layout contradicts the configuration.
func (b *Backend) Kind() Kind {
	if c := b.chosen.Load(); c != nil && c.err == nil {
		return c.kind
	}
	return ""
}

// Packs is the packed backend, once the bucket's layout is known to be
// packs; nil before, or in the per-object layout.
func (b *Backend) Packs() *packed.Backend {
	if c := b.chosen.Load(); c != nil {
		return c.packs
	}
	return nil
}

// Stats is the packs' statistics; zero without packs.
func (b *Backend) Stats() packed.Stats {
	if p := b.Packs(); p != nil {
		return p.Stats()
	}
	return packed.Stats{}
}

// SetReadAhead names the sink of the packs' read-ahead
// (packed.Backend.SetReadAhead), now or once they are chosen.
func (b *Backend) SetReadAhead(sink packed.ReadAheadSink) {
	b.sinkMu.Lock()
	defer b.sinkMu.Unlock()
	b.sink = sink
	if p := b.Packs(); p != nil {
		p.SetReadAhead(sink)
	}
}

// decideLocked asks for the bucket's layout and opens the backend for
// it; b.mu is held.
func (b *Backend) decideLocked() {
	if b.chosen.Load() != nil || b.closed {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.RequestTimeout)
	defer cancel()
	kind, err := Decide(ctx, b.cfg.Bucket, b.cfg.Want)
	var mis *tier.ErrMisconfigured
	switch {
	case errors.As(err, &mis):
		b.log.Error("tier: the bucket's layout contradicts the configuration", "err", err)
		b.chosen.Store(&choice{err: mis})
		return
	case err != nil:
		b.lastErr.Store(&err)
		b.retryAt.Store(time.Now().Add(b.cfg.RetryEvery).UnixNano())
		return
	case kind == Objects && b.cfg.Packed.Retention > 0:
		mis = &tier.ErrMisconfigured{Cause: "retention= is for packs, and the bucket is in the per-object layout (nothing would be deleted): remove retention=, or convert the bucket: membuf bucket --convert-to packs URL"}
		b.log.Error("tier: the bucket's layout contradicts the configuration", "err", mis)
		b.chosen.Store(&choice{err: mis})
		return
	case kind == Objects:
		b.log.Info("tier: the bucket's layout", "layout", kind)
		b.chosen.Store(&choice{kind: kind, backend: b.cfg.Objects})
		return
	}
	p, err := packed.New(b.cfg.Packed)
	if err != nil {
		b.chosen.Store(&choice{err: &tier.ErrMisconfigured{Cause: err.Error()}})
		return
	}
	b.sinkMu.Lock()
	p.SetReadAhead(b.sink)
	b.chosen.Store(&choice{kind: kind, backend: p, packs: p})
	b.sinkMu.Unlock()
	b.log.Info("tier: the bucket's layout", "layout", kind, "format", Format)
}

// backend returns the chosen backend. Until there is one, a call that
// may wait (Probe) asks the bucket; another fails at once, asking it in
// the background (kick), so that no client's request waits on a bucket
// that does not answer.
func (b *Backend) backend(wait bool) (tier.Backend, error) {
	if c := b.chosen.Load(); c != nil {
		return c.backend, c.err
	}
	if !wait {
		b.kick()
		return nil, notYet(b.lastCause())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.decideLocked()
	if c := b.chosen.Load(); c != nil {
		return c.backend, c.err
	}
	return nil, notYet(b.lastCause())
}

// lastCause is the last failed attempt's error, or why there is none.
func (b *Backend) lastCause() error {
	if err := b.lastErr.Load(); err != nil {
		return *err
	}
	return errors.New("the bucket has not answered yet")
}

// notYet is the error of a call made before the layout is known: the
// backend is as good as down.
func notYet(cause error) error {
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "the shared tier's layout is not known yet (the bucket has not answered)", Where: ObjectName, Cause: cause}
}

// unusable is the error of a call to a backend whose layout contradicts
// the configuration.
func unusable(err error) error {
	return &tier.RequestError{Kind: cas.ErrUnavailable, Public: "the shared tier cannot be used as configured", Where: ObjectName, Cause: err}
}

// Get implements tier.Backend.
func (b *Backend) Get(ctx context.Context, k tier.Key, off int64) (tier.Object, error) {
	be, err := b.backend(false)
	if err != nil {
		return tier.Object{}, callError(err)
	}
	return be.Get(ctx, k, off)
}

// Put implements tier.Backend.
func (b *Backend) Put(ctx context.Context, uploads []tier.Upload) []error {
	be, err := b.backend(false)
	if err != nil {
		errs := make([]error, len(uploads))
		for i := range errs {
			errs[i] = callError(err)
		}
		return errs
	}
	return be.Put(ctx, uploads)
}

// Stat implements tier.Backend.
func (b *Backend) Stat(ctx context.Context, ks []tier.Key, sizes []int64) error {
	be, err := b.backend(false)
	if err != nil {
		for i := range sizes {
			sizes[i] = -1
		}
		return callError(err)
	}
	return be.Stat(ctx, ks, sizes)
}

// Probe implements tier.Backend: it waits for the layout, and then
// probes the backend of it.
func (b *Backend) Probe(ctx context.Context) error {
	be, err := b.backend(true)
	if err != nil {
		return err // an *tier.ErrMisconfigured, or the bucket's
	}
	return be.Probe(ctx)
}

// callError is err as a call other than Probe returns it.
func callError(err error) error {
	if mis, ok := errors.AsType[*tier.ErrMisconfigured](err); ok {
		return unusable(mis)
	}
	return err
}

// Touch implements tier.Toucher: the packs' (their retention's).
func (b *Backend) Touch(k tier.Key) {
	if p := b.Packs(); p != nil {
		p.Touch(k)
	}
}

// Close stops the packs, if chosen, and any decision under way. It
// closes neither Objects nor Bucket.
func (b *Backend) Close() error {
	b.stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if p := b.Packs(); p != nil {
		return p.Close()
	}
	return nil
}
