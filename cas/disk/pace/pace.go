// Package pace holds background work (the disk store's scrubber) to a
// rate on average, in bytes or whatever the caller counts as cost, so that
// it does not compete with clients for the disk. Its time is a Clock: the
// wall clock, or a test's that moves only when the work sleeps, so that a
// test counts the work per unit of time without waiting for it.
//
// It imports nothing of the cache.
package pace

import (
	"context"
	"time"
)

// Clock is a Pacer's time.
type Clock struct {
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error // returns ctx's error if it ends first
}

// Wall is the wall clock.
var Wall = Clock{
	Now: time.Now,
	Sleep: func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	},
}

// window is how long a Pacer's account runs before it starts afresh.
const window = time.Minute

// Pacer holds its caller to a rate per second on average, sleeping as
// needed. Not safe for concurrent use.
type Pacer struct {
	rate  int64
	ctx   context.Context
	clock Clock
	start time.Time
	spent int64
}

// New returns a Pacer of rate (positive) per second on clock, whose sleeps
// end early with ctx's error.
func New(ctx context.Context, rate int64, clock Clock) *Pacer {
	return &Pacer{rate: rate, ctx: ctx, clock: clock}
}

// Wait charges n and sleeps until the rate allows it. It returns ctx's
// error if ctx ends first.
func (p *Pacer) Wait(n int) error {
	now := p.clock.Now()
	if p.start.IsZero() || now.Sub(p.start) > window {
		// Start a fresh window now and then, so that time spent idle
		// (between passes, or before the first chunk) is not saved up
		// for a burst.
		p.start, p.spent = now, 0
	}
	p.spent += int64(n)
	due := p.start.Add(time.Duration(float64(p.spent) / float64(p.rate) * float64(time.Second)))
	if d := due.Sub(now); d > 0 {
		return p.clock.Sleep(p.ctx, d)
	}
	return nil
}
