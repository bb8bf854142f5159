//go:build race

package membuf

// buffersRaceEnabled is true under the race detector, which makes sync.Pool
// drop a share of what is Put at random: header recycling then allocates, so
// the allocation tests skip.
const buffersRaceEnabled = true
