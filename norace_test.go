//go:build !race

package membuf

// See race_test.go.
const raceEnabled = false
