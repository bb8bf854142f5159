package ages_test

import (
	"testing"
	"time"

	"github.com/membuf/membuf/cas/disk/ages"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func TestClockPlacesTicksBetweenMarks(t *testing.T) {
	var c ages.Clock
	if _, ok := c.Time(5); ok {
		t.Fatal("an empty clock knows a time")
	}
	c.Mark(10, t0)
	c.Mark(110, t0.Add(100*time.Second))
	c.Mark(50, t0.Add(time.Hour)) // back in tick: dropped
	for _, tc := range []struct {
		tick uint64
		want time.Time
	}{
		{1, t0}, {10, t0}, {60, t0.Add(50 * time.Second)}, {110, t0.Add(100 * time.Second)}, {500, t0.Add(100 * time.Second)},
	} {
		if got, _ := c.Time(tc.tick); !got.Equal(tc.want) {
			t.Errorf("Time(%d) = %v; want %v", tc.tick, got, tc.want)
		}
	}
}

// However many marks, the clock keeps at most MaxSamples and still spans
// the whole history: the first tick is placed near the first mark, the
// last at the last.
func TestClockStaysBoundedAndSpansItsHistory(t *testing.T) {
	var c ages.Clock
	const marks = 10 * ages.MaxSamples
	for i := range uint64(marks) {
		c.Mark(i+1, t0.Add(time.Duration(i)*time.Minute))
	}
	last := t0.Add((marks - 1) * time.Minute)
	if got, _ := c.Time(marks); !got.Equal(last) {
		t.Errorf("the last tick is placed at %v; want %v", got, last)
	}
	got, _ := c.Time(1)
	if d := got.Sub(t0); d < 0 || d > time.Duration(marks/ages.MaxSamples*4)*time.Minute {
		t.Errorf("the first tick is placed %v after the first mark", d)
	}
	mid, _ := c.Time(marks / 2)
	if d := mid.Sub(t0.Add(marks / 2 * time.Minute)).Abs(); d > 2*time.Minute {
		t.Errorf("the middle tick is placed %v off", d)
	}
	if n := ages.SamplesForTest(&c); n > ages.MaxSamples {
		t.Errorf("%d samples kept; want at most %d", n, ages.MaxSamples)
	}
}

func TestRecorderBucketsAndYoungestOfTheLastHour(t *testing.T) {
	var r ages.Recorder
	r.Observe(t0, 30*time.Second, 1)                  // bucket 0 (<= 1m)
	r.Observe(t0, 2*time.Hour, 3)                     // bucket 5 (<= 3h)
	r.Observe(t0, 90*24*time.Hour, 1)                 // above every bound
	r.Observe(t0.Add(30*time.Minute), 4*time.Hour, 1) // bucket 6 (<= 6h)
	r.Observe(t0, time.Hour, 0)                       // nothing
	s := r.Snapshot(t0.Add(30 * time.Minute))
	want := map[int]uint64{0: 1, 5: 3, 6: 1, len(ages.Bounds): 1}
	for i, c := range s.Counts {
		if c != want[i] {
			t.Errorf("bucket %d counts %d; want %d", i, c, want[i])
		}
	}
	if s.Count != 6 || s.Sum != 30*time.Second+6*time.Hour+90*24*time.Hour+4*time.Hour {
		t.Errorf("count %d, sum %v", s.Count, s.Sum)
	}
	if !s.YoungestSet || s.Youngest != 30*time.Second {
		t.Errorf("youngest %v (%v); want 30s", s.Youngest, s.YoungestSet)
	}
	// An hour and a bit later only the eviction at t0+30m is in the window.
	s = r.Snapshot(t0.Add(61 * time.Minute))
	if !s.YoungestSet || s.Youngest != 4*time.Hour {
		t.Errorf("an hour on: youngest %v (%v); want 4h", s.Youngest, s.YoungestSet)
	}
	if s = r.Snapshot(t0.Add(2 * time.Hour)); s.YoungestSet {
		t.Errorf("two hours on: youngest %v; want none", s.Youngest)
	}
}
