package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrStalled is the cause a request is canceled with when its transfer
// stops making progress.
var ErrStalled = errors.New("the transfer made no progress")

// StallGuard returns a RoundTripper that sends through next and cancels a
// request whose transfer waits longer than timeout for the network: a
// request body that the connection does not take (the time between the
// transport's reads of it) or a response body that does not arrive (the
// time inside a read of it). The whole transfer is not bounded, since it
// may be long, and neither is the time the request body's own source
// takes (the tier reading its disk) nor the caller's between reads of the
// response (a slow client): those are not the store stalling. Waiting for
// the response's headers is the Transport's ResponseHeaderTimeout.
func StallGuard(next http.RoundTripper, timeout time.Duration) http.RoundTripper {
	return &stallGuard{next: next, timeout: timeout}
}

type stallGuard struct {
	next    http.RoundTripper
	timeout time.Duration
}

func (g *stallGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	dog := newWatchdog(g.timeout, cancel)
	req = req.WithContext(ctx)
	var body *sentBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &sentBody{body: req.Body, dog: dog}
		req.Body = body
		dog.arm() // until the transport first reads it
	}
	res, err := g.next.RoundTrip(req)
	if body != nil {
		body.done()
	}
	if err != nil {
		err = stalled(ctx, err)
		cancel(err)
		return nil, err
	}
	// The request's context must last as long as the response's body.
	res.Body = &receivedBody{ctx: ctx, body: res.Body, dog: dog, cancel: cancel}
	return res, nil
}

// watchdog calls cancel with ErrStalled when it stays armed longer than
// its timeout.
type watchdog struct {
	timeout time.Duration
	timer   *time.Timer
}

func newWatchdog(timeout time.Duration, cancel context.CancelCauseFunc) *watchdog {
	t := time.AfterFunc(timeout, func() { cancel(fmt.Errorf("%w for %v", ErrStalled, timeout)) })
	t.Stop()
	return &watchdog{timeout: timeout, timer: t}
}

func (w *watchdog) arm()    { w.timer.Reset(w.timeout) }
func (w *watchdog) disarm() { w.timer.Stop() }

// sentBody is a request's body: the watchdog runs between the
// transport's reads (the connection taking the bytes), not during them
// (the source producing them).
type sentBody struct {
	body io.ReadCloser
	dog  *watchdog
	mu   sync.Mutex
	over bool
}

func (b *sentBody) Read(p []byte) (int, error) {
	b.dog.disarm()
	n, err := b.body.Read(p)
	b.mu.Lock()
	if err == nil && !b.over {
		b.dog.arm()
	}
	b.mu.Unlock()
	return n, err
}

func (b *sentBody) Close() error {
	b.done()
	return b.body.Close()
}

// done disarms the watchdog for good: the body is sent, or abandoned.
func (b *sentBody) done() {
	b.mu.Lock()
	b.over = true
	b.dog.disarm()
	b.mu.Unlock()
}

// receivedBody is a response's body: the watchdog runs during each read
// (waiting for the network); Close ends the request's context.
type receivedBody struct {
	ctx    context.Context
	body   io.ReadCloser
	dog    *watchdog
	cancel context.CancelCauseFunc
}

func (b *receivedBody) Read(p []byte) (int, error) {
	b.dog.arm()
	n, err := b.body.Read(p)
	b.dog.disarm()
	if err != nil && !errors.Is(err, io.EOF) {
		err = stalled(b.ctx, err)
	}
	return n, err
}

func (b *receivedBody) Close() error {
	b.dog.disarm()
	err := b.body.Close()
	b.cancel(context.Canceled)
	return err
}

// stalled adds to err that the watchdog canceled the request, if it did:
// "context canceled" alone would not say why.
func stalled(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) && !errors.Is(err, ErrStalled) {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}
