package ages

import "time"

// Bounds are the upper bounds of the Recorder's histogram buckets, from a
// minute to a month, with Bazel's three-hour lease among them; ages above
// the last fall in a bucket of their own.
var Bounds = [...]time.Duration{
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 3 * 24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour,
}

// Window is how far back Evictions.Youngest looks.
const Window = time.Hour

// Recorder counts the ages of evicted entries. The zero Recorder is
// ready; it is not safe for concurrent use.
type Recorder struct {
	counts [len(Bounds) + 1]uint64 // the last: above every bound
	sum    time.Duration
	// minutes[m%60] is the youngest age evicted in minute m (of the Unix
	// epoch), if minute is m: a window of an hour in fixed memory.
	minutes [60]minuteMin
}

type minuteMin struct {
	minute   int64
	youngest time.Duration
	any      bool
}

// Observe records n entries of age age evicted at now.
func (r *Recorder) Observe(now time.Time, age time.Duration, n int64) {
	if n <= 0 {
		return
	}
	age = max(age, 0)
	b := len(Bounds)
	for i, bound := range Bounds {
		if age <= bound {
			b = i
			break
		}
	}
	r.counts[b] += uint64(n)
	r.sum += time.Duration(n) * age
	m := now.Unix() / 60
	slot := &r.minutes[m%60]
	if !slot.any || slot.minute != m {
		*slot = minuteMin{minute: m, youngest: age, any: true}
	} else {
		slot.youngest = min(slot.youngest, age)
	}
}

// Evictions is a Recorder's snapshot.
type Evictions struct {
	// Counts[i] is how many entries were evicted at an age of at most
	// Bounds[i] and more than Bounds[i-1]; the last, above every bound.
	Counts [len(Bounds) + 1]uint64
	Count  uint64        // all of them
	Sum    time.Duration // their ages added up
	// Youngest is the youngest age evicted in the Window before the
	// snapshot, if YoungestSet.
	Youngest    time.Duration
	YoungestSet bool
}

// Snapshot returns what was recorded, the youngest as of now.
func (r *Recorder) Snapshot(now time.Time) Evictions {
	e := Evictions{Counts: r.counts, Sum: r.sum}
	for _, c := range r.counts {
		e.Count += c
	}
	m := now.Unix() / 60
	for _, slot := range r.minutes {
		if slot.any && slot.minute > m-60 && slot.minute <= m && (!e.YoungestSet || slot.youngest < e.Youngest) {
			e.Youngest, e.YoungestSet = slot.youngest, true
		}
	}
	return e
}
