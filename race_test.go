//go:build race

package membuf

// raceEnabled is true under the race detector, which makes sync.Pool drop a
// share of what is Put at random: header recycling then allocates, so the
// allocation tests skip (skipUnderRace). (internal/testenv.Race says the
// same to the external tests; this package's own tests cannot import it.)
const raceEnabled = true
