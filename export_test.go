package membuf

import "testing"

// For the external tests (package membuf_test) too.

// RaceEnabled: see race_test.go.
const RaceEnabled = raceEnabled

// SetDebugEnv sets, for the test, what MEMBUF_DEBUG turned on at start-up:
// debug mode for every buffer and every pool made during the test. Tests
// whose expectations depend on it set it, so that they pass whether or not
// the environment has it.
func SetDebugEnv(t testing.TB, on bool) {
	old := debugFromEnv
	debugFromEnv = on
	t.Cleanup(func() { debugFromEnv = old })
}

// DebugFromEnv reports whether MEMBUF_DEBUG turned debug mode on.
func DebugFromEnv() bool { return debugFromEnv }
