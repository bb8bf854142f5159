package pace_test

import (
	"context"
	"testing"
	"time"

	"github.com/membuf/membuf/cas/disk/pace"
)

// virtual is a clock whose time moves only when the pacer sleeps.
func virtual(now *time.Time) pace.Clock {
	return pace.Clock{
		Now: func() time.Time { return *now },
		Sleep: func(ctx context.Context, d time.Duration) error {
			*now = now.Add(d)
			return ctx.Err()
		},
	}
}

// TestPacerHoldsTheRate: charging 10 MB at 1 MB/s takes 10 s of the clock,
// in any size of step; an idle minute is not saved up for a burst.
func TestPacerHoldsTheRate(t *testing.T) {
	for _, step := range []int{1000, 64 << 10, 1 << 20} {
		now := time.Unix(1e9, 0)
		start := now
		p := pace.New(context.Background(), 1e6, virtual(&now))
		for spent := 0; spent < 10e6; spent += step {
			if err := p.Wait(step); err != nil {
				t.Fatal(err)
			}
		}
		if got := now.Sub(start); got < 9*time.Second || got > 11*time.Second {
			t.Errorf("steps of %d: 10 MB at 1 MB/s took %v; want about 10s", step, got)
		}
		now = now.Add(2 * time.Minute) // idle
		before := now
		if err := p.Wait(5e6); err != nil {
			t.Fatal(err)
		}
		if got := now.Sub(before); got < 4*time.Second {
			t.Errorf("steps of %d: 5 MB after an idle spell took %v; want about 5s, not a burst", step, got)
		}
	}
}

// TestPacerStopsWithItsContext: a wait ends with the context's error.
func TestPacerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	now := time.Unix(1e9, 0)
	p := pace.New(ctx, 1, virtual(&now))
	if err := p.Wait(1000); err != context.Canceled {
		t.Fatalf("Wait with its context ended: %v; want context.Canceled", err)
	}
}
