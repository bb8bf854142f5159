package upstream

import (
	"context"
	"fmt"
	"time"
)

// Stall bounds a request's waits: its context ends, with a cause saying
// so, when timeout passes without a call to Progress, so that an upstream
// that stops answering, or stops sending or taking a body halfway, frees
// the request, while a long transfer that keeps moving is never cut.
type Stall struct {
	timeout time.Duration
	timer   *time.Timer
	cancel  context.CancelCauseFunc
}

// NewStall returns a context derived from ctx that Stall ends after
// timeout without progress, or when Stop is called; the caller must call
// Stop when the request is over.
func NewStall(ctx context.Context, timeout time.Duration) (context.Context, *Stall) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &Stall{timeout: timeout, cancel: cancel}
	cause := fmt.Errorf("the upstream neither answered nor made progress for %v", timeout)
	s.timer = time.AfterFunc(timeout, func() { cancel(cause) })
	return ctx, s
}

// Progress restarts the timeout: an answer came, or bytes moved.
func (s *Stall) Progress() { s.timer.Reset(s.timeout) }

// Stop ends the request's context and its timer.
func (s *Stall) Stop() {
	s.timer.Stop()
	s.cancel(context.Canceled)
}
