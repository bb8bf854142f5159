package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrStalled is the cause a Watchdog cancels its context with.
var ErrStalled = errors.New("the transfer made no progress")

// Watchdog cancels a transfer that waits longer than its timeout for one
// step (a Read of a download's body, a Write into an upload), while not
// bounding the whole, which may be long: a client library's timeouts
// cover waiting for an answer, not a body that stops flowing. Only the
// time spent inside a step counts: a caller slow to read is not the store
// stalling.
type Watchdog struct {
	timeout time.Duration
	timer   *time.Timer
}

// NewWatchdog returns a Watchdog that calls cancel with ErrStalled when a
// step takes longer than timeout.
func NewWatchdog(timeout time.Duration, cancel context.CancelCauseFunc) *Watchdog {
	t := time.AfterFunc(timeout, func() {
		cancel(fmt.Errorf("%w for %v", ErrStalled, timeout))
	})
	t.Stop()
	return &Watchdog{timeout: timeout, timer: t}
}

// Step runs f with the watchdog armed.
func (w *Watchdog) Step(f func() (int, error)) (int, error) {
	w.timer.Reset(w.timeout)
	defer w.timer.Stop()
	return f()
}

// Stop disarms the watchdog for good.
func (w *Watchdog) Stop() { w.timer.Stop() }

// WatchedBody is a download's body whose every Read is a step of a
// Watchdog, and whose Close also ends the download's context (cancel):
// the context must outlive the Get that made it, until the body is done.
func WatchedBody(body io.ReadCloser, w *Watchdog, cancel context.CancelCauseFunc) io.ReadCloser {
	return &watchedBody{body: body, w: w, cancel: cancel}
}

type watchedBody struct {
	body   io.ReadCloser
	w      *Watchdog
	cancel context.CancelCauseFunc
}

func (b *watchedBody) Read(p []byte) (int, error) {
	return b.w.Step(func() (int, error) { return b.body.Read(p) })
}

func (b *watchedBody) Close() error {
	b.w.Stop()
	err := b.body.Close()
	b.cancel(context.Canceled)
	return err
}

// WatchedWriter is an upload's writer whose every Write is a step of w.
func WatchedWriter(dst io.Writer, w *Watchdog) io.Writer {
	return &watchedWriter{dst: dst, w: w}
}

type watchedWriter struct {
	dst io.Writer
	w   *Watchdog
}

func (ww *watchedWriter) Write(p []byte) (int, error) {
	return ww.w.Step(func() (int, error) { return ww.dst.Write(p) })
}
