package upload

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// An upload stream that stops sending while its handler waits in a receive
// keeps the budget that receive reserved (Budget): 1 MiB for a first
// message, a window or a message after that. Enough such streams would hold
// the whole budget and make every other upload wait for as long as they
// stay open, and keepalive does not end a stream whose client answers
// pings. So a receive that waits longer than Options.UploadStallTimeout
// ends its stream: DEADLINE_EXCEEDED, the upload kept for resumption (as
// for any interrupted upload, QueryWriteStatus gives the offset).
//
// A handler blocked in RecvMsg cannot end its own stream, and grpc-go reads
// a stream's data under the context the stream was created with, which a
// handler cannot cancel. The one hook that sets that context is the
// server's InTapHandle (grpc-go internal/transport/http2_server.go: the
// context it returns becomes the stream's, which RecvMsg waits on), so
// reapi.ServerOptions installs an InTapHandle that gives each Write stream
// the context of WriteStreamContext, which carries the cancel that a
// receive's stall timer (StallTimer) calls. A server made
// without ServerOptions has no such context, and its receives wait as long
// as the client keeps the stream.

// errStalled is the cause a stalled receive's stream is cancelled
// with.
var errStalled = errors.New("upload stalled: no data from the client within the stall timeout")

// uploadStreamKey finds an uploadStreamContext among a stream context's
// parents.
type uploadStreamKey struct{}

// uploadStreamContext is a Write stream's context, cancellable by the
// stream's handler.
type uploadStreamContext struct {
	context.Context
	cancel context.CancelCauseFunc
}

// Err reports a stream ended by its stall timer as past its deadline.
// grpc-go answers a receive that fails for its stream's context itself,
// with the status of that context's Err (and the handler's own status is
// then not sent): so the client sees DEADLINE_EXCEEDED, the code for an
// operation that ran out of time, where Canceled would say the client had
// cancelled.
func (c *uploadStreamContext) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), errStalled) {
		return context.DeadlineExceeded
	}
	return err
}

func (c *uploadStreamContext) Value(key any) any {
	if key == (uploadStreamKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// WriteStreamContext returns the context for a ByteStream Write stream
// whose context is ctx: one that the stream's stall timer can end
// (StallTimer.Start finds it). It does nothing that waits: it is for an
// InTapHandle, which grpc-go calls on the connection's reading goroutine.
func WriteStreamContext(ctx context.Context) context.Context {
	c, cancel := context.WithCancelCause(ctx)
	return &uploadStreamContext{Context: c, cancel: cancel}
}

// stallTimer ends a Write stream whose receive waits longer than timeout.
// It belongs to a Receiver and is recycled with it: the timer is made
// once, and each stream sets the cancel it calls.
type stallTimer struct {
	timeout time.Duration
	timer   *time.Timer
	// stream is the stream being timed, or nil. The timer's function loads
	// it when it fires; a stream's end swaps in nil before stopping the
	// timer, so a function already running can only cancel the stream it
	// was armed for, which is ending anyway.
	stream atomic.Pointer[uploadStreamContext]
}

// start times the receives of the stream whose context is ctx, if it was
// tapped (uploadStreamContext) and timeout is positive.
func (t *stallTimer) start(ctx context.Context, timeout time.Duration) {
	c, _ := ctx.Value(uploadStreamKey{}).(*uploadStreamContext)
	if c == nil || timeout <= 0 {
		return
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(time.Hour, t.fire)
		t.timer.Stop()
	}
	t.timeout = timeout
	t.stream.Store(c)
}

func (t *stallTimer) fire() {
	if c := t.stream.Load(); c != nil {
		c.cancel(errStalled)
	}
}

// arm starts the clock for one receive; disarm stops it when the receive
// returns.
func (t *stallTimer) arm() {
	if t.stream.Load() != nil {
		t.timer.Reset(t.timeout)
	}
}

func (t *stallTimer) disarm() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// stop ends the timing of the current stream.
func (t *stallTimer) stop() {
	t.stream.Store(nil)
	t.disarm()
}

// stalled reports whether ctx, a Write stream's context, was ended by its
// stall timer.
func stalled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errStalled)
}
