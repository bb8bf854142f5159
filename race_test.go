//go:build race

package membuf

// raceEnabled is true under the race detector, which makes sync.Pool drop a
// share of what is Put at random: header recycling then allocates, so the
// allocation tests skip, and the pool's front loses buffers, so the pool
// tests that count front hits exactly only bound them.
const raceEnabled = true
