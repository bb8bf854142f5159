package buildmix

import (
	"math"
	"slices"
	"testing"
)

// The mix's bands hold the shares of a real Bazel build's outputs, and a seed
// gives the same sizes again.
func TestBazelMixSizes(t *testing.T) {
	const n = 20000
	sizes := BazelMixSizes(n, 7)
	var small, medium, large int
	for _, s := range sizes {
		switch {
		case s >= 1<<10 && s < 16<<10:
			small++
		case s >= 16<<10 && s < 1<<20:
			medium++
		case s >= 1<<20 && s < 8<<20:
			large++
		default:
			t.Fatalf("size %d outside 1 KiB to 8 MiB", s)
		}
	}
	for _, b := range []struct {
		name  string
		got   int
		share float64
	}{{"1-16 KiB", small, 0.70}, {"16 KiB-1 MiB", medium, 0.25}, {"1-8 MiB", large, 0.05}} {
		// Four standard deviations of a binomial count.
		if tol := 4 * math.Sqrt(n*b.share*(1-b.share)); math.Abs(float64(b.got)-n*b.share) > tol {
			t.Errorf("%s: %d of %d sizes, want %.0f ± %.0f", b.name, b.got, n, n*b.share, tol)
		}
	}
	// Log-uniform within a band: as many small sizes below 4 KiB (the
	// band's geometric middle) as above.
	var below int
	for _, s := range sizes {
		if s < 4<<10 {
			below++
		}
	}
	if d := math.Abs(float64(below) - float64(small)/2); d > 4*math.Sqrt(float64(small)/4) {
		t.Errorf("%d of %d small sizes below 4 KiB, want about half", below, small)
	}
	if !slices.Equal(sizes, BazelMixSizes(n, 7)) || slices.Equal(sizes, BazelMixSizes(n, 8)) {
		t.Error("sizes do not follow the seed")
	}
}
