package ages

import (
	"slices"
	"time"
)

// MaxSamples bounds a Clock's memory: past it, every other sample is
// dropped and the spacing doubles, so the samples always span the whole
// history at a resolution of about a 2,048th of it.
const MaxSamples = 4096

// Clock maps a counter that advances at each use (the store's tick) to
// the wall time, approximately: the store marks a tick with the time now
// when it commits (and when it evicts), and a tick between two marks is
// placed between their times in proportion. Lookups advance the tick
// without a mark, so that a read costs no clock reading. The zero Clock is
// ready; it is not safe for concurrent use.
type Clock struct {
	samples []sample // ticks and times, both increasing
	spacing time.Duration
}

type sample struct {
	tick uint64
	at   time.Time
}

// Mark records that tick came at at. Marks closer than the clock's
// spacing to the previous one, or going back in tick or time, are
// dropped: a mark costs nothing when the store commits often.
func (c *Clock) Mark(tick uint64, at time.Time) {
	if n := len(c.samples); n > 0 {
		last := c.samples[n-1]
		if tick <= last.tick || at.Before(last.at.Add(c.spacing)) {
			return
		}
	}
	if len(c.samples) == MaxSamples {
		c.thin()
	}
	c.samples = append(c.samples, sample{tick, at})
}

// thin drops every other sample, keeping the newest, and doubles the
// spacing.
func (c *Clock) thin() {
	n := 0
	for i := len(c.samples) % 2; i < len(c.samples); i += 2 {
		c.samples[n] = c.samples[i]
		n++
	}
	c.samples = c.samples[:n]
	c.spacing = max(2*c.spacing, time.Second)
}

// Time returns when tick came, approximately, and false if the clock has
// no mark yet. A tick before the first mark is placed at it, one after
// the last at it.
func (c *Clock) Time(tick uint64) (time.Time, bool) {
	if len(c.samples) == 0 {
		return time.Time{}, false
	}
	i, found := slices.BinarySearchFunc(c.samples, tick, func(s sample, t uint64) int {
		switch {
		case s.tick < t:
			return -1
		case s.tick > t:
			return 1
		}
		return 0
	})
	switch {
	case found:
		return c.samples[i].at, true
	case i == 0:
		return c.samples[0].at, true
	case i == len(c.samples):
		return c.samples[i-1].at, true
	}
	lo, hi := c.samples[i-1], c.samples[i]
	frac := float64(tick-lo.tick) / float64(hi.tick-lo.tick)
	return lo.at.Add(time.Duration(frac * float64(hi.at.Sub(lo.at)))), true
}
