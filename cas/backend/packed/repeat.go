package packed

import (
	"context"
	"time"
)

// repeat runs work every period (first at once if now; also whenever kick,
// which may be nil, has a token) until ctx is done: the listing, the
// janitor and the uploads of copies. A failure is logged when work starts
// failing (failed, with the error) and when it succeeds again (recovered),
// not each time: an outage would log a line a period.
func (b *Backend) repeat(ctx context.Context, period time.Duration, kick <-chan struct{}, now bool, work func(context.Context) error, failed, recovered string) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	failing := false
	for {
		if !now {
			select {
			case <-tick.C:
			case <-kick:
			case <-ctx.Done():
				return
			}
		}
		now = false
		err := work(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			b.log.Warn(failed, "err", err)
		case err == nil && failing:
			b.log.Info(recovered)
		}
		failing = err != nil
	}
}
