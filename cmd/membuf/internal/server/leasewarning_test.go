package server

import (
	"testing"
	"time"

	"github.com/membuf/membuf/cas/disk/ages"
)

// The warning comes when an entry younger than --min-age was evicted in
// the last hour, at most once an hour, and never for older evictions.
func TestLeaseWarningIsDueForYoungEvictionsOnly(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	w := &leaseWarning{minAge: 3 * time.Hour, maxSize: 10 << 30}
	young := ages.Evictions{Count: 1, Youngest: 20 * time.Minute, YoungestSet: true}
	old := ages.Evictions{Count: 1, Youngest: 5 * time.Hour, YoungestSet: true}
	for _, tc := range []struct {
		at   time.Duration
		e    ages.Evictions
		want bool
	}{
		{0, ages.Evictions{}, false}, // nothing evicted
		{time.Minute, old, false},
		{2 * time.Minute, young, true},
		{3 * time.Minute, young, false}, // warned a minute ago
		{62 * time.Minute, young, true}, // an hour on
		{3 * time.Hour, old, false},
	} {
		got := w.check(t0.Add(tc.at), tc.e) != nil
		if got != tc.want {
			t.Errorf("at +%v with %+v: warned %v; want %v", tc.at, tc.e, got, tc.want)
		}
	}
}
