//go:build race

package cas

// The race detector makes sync.Pool drop items at random, so allocation
// counts are only checked without it.
const raceEnabled = true
