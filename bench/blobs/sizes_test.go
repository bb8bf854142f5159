package blobs

import (
	"math"
	"slices"
	"testing"
)

func TestLogNormalDraw(t *testing.T) {
	d := LogNormal{Median: 64 << 10, Sigma: 1.5, Min: 1, Max: 16 << 20}
	a, b := d.Draw(2001, 3), d.Draw(2001, 3)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different sizes")
	}
	if slices.Equal(a, d.Draw(2001, 4)) {
		t.Error("different seeds, same sizes")
	}
	s := slices.Clone(a)
	slices.Sort(s)
	if s[0] < d.Min || s[len(s)-1] > d.Max {
		t.Errorf("sizes outside [%d, %d]: %d..%d", d.Min, d.Max, s[0], s[len(s)-1])
	}
	if med := s[len(s)/2]; med < d.Median*3/4 || med > d.Median*4/3 {
		t.Errorf("median of draws %d, want about %d", med, d.Median)
	}
	for _, bad := range []LogNormal{{Median: 0, Min: 1, Max: 2}, {Median: 1, Sigma: -1, Min: 1, Max: 2}, {Median: 1, Sigma: math.NaN(), Min: 1, Max: 2}, {Median: 1, Min: 3, Max: 2}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
