package blobs

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/membuf/membuf/bench/report"
)

// LogNormal describes blob sizes spread the way cache traffic is: most
// small, a long tail of large ones. The logarithm of a size is normally
// distributed around log(Median) with standard deviation Sigma; draws are
// clipped to [Min, Max].
type LogNormal struct {
	Median   int64   `json:"median"`
	Sigma    float64 `json:"sigma"`
	Min, Max int64
}

// Validate reports what is wrong with d, if anything.
func (d LogNormal) Validate() error {
	switch {
	case d.Median <= 0:
		return fmt.Errorf("log-normal median must be positive, got %d", d.Median)
	case d.Sigma < 0 || math.IsNaN(d.Sigma) || math.IsInf(d.Sigma, 0):
		return fmt.Errorf("log-normal sigma must be a finite number >= 0, got %v", d.Sigma)
	case d.Min <= 0 || d.Max < d.Min:
		return fmt.Errorf("log-normal bounds must satisfy 0 < min <= max, got [%d, %d]", d.Min, d.Max)
	}
	return nil
}

// Draw returns n sizes drawn from d with a generator seeded by seed: the
// same arguments give the same sizes.
func (d LogNormal) Draw(n int, seed uint64) []int64 {
	rng := rand.New(rand.NewPCG(seed, 0x6d656d627566)) // "membuf"
	sizes := make([]int64, n)
	mu := math.Log(float64(d.Median))
	for i := range sizes {
		v := math.Exp(mu + d.Sigma*rng.NormFloat64())
		sizes[i] = min(max(int64(v), d.Min), d.Max)
	}
	return sizes
}

// String describes d for a table.
func (d LogNormal) String() string {
	return fmt.Sprintf("log-normal(median %s, sigma %.2g, %s to %s)", report.FormatBytes(d.Median), d.Sigma, report.FormatBytes(d.Min), report.FormatBytes(d.Max))
}
