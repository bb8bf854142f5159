//go:build !race

package membuf

// See buffer_race_test.go.
const buffersRaceEnabled = false
